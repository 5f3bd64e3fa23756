package problems

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Harness exit codes of the KernelBot contract.
const (
	ExitOK         = 0
	ExitCUDA       = 110 // a CUDA (or HIP) error
	ExitPipe       = 111 // the result pipe could not be opened
	ExitValidation = 112 // a wrong result
	ExitBadCase    = 113 // a case the harness could not read
	ExitTimeout    = 114 // the harness ran out of time
	// ExitHarness is ours: the harness could not start (the runtime or the
	// problem's reference failed to import), no fault of the submission.
	ExitHarness = 115
)

// DescribeExit says what a harness exit code means.
func DescribeExit(code int) string {
	switch code {
	case ExitOK:
		return "ok"
	case ExitCUDA:
		return "CUDA error"
	case ExitPipe:
		return "result pipe could not be opened"
	case ExitValidation:
		return "wrong result"
	case ExitBadCase:
		return "bad test case"
	case ExitTimeout:
		return "timed out"
	case ExitHarness:
		return "harness error (the problem or the runtime, not the submission)"
	case -1:
		return "killed"
	}
	return fmt.Sprintf("exit status %d", code)
}

// TestResult is one test's verdict from the harness.
type TestResult struct {
	Index   int    `json:"index"`
	Spec    string `json:"spec"`
	Status  string `json:"status"` // pass or fail
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
}

// Passed reports whether the test passed.
func (r TestResult) Passed() bool { return r.Status == "pass" }

// BenchmarkResult is one benchmark's timing statistics, in nanoseconds.
type BenchmarkResult struct {
	Index  int     `json:"index"`
	Spec   string  `json:"spec"`
	Status string  `json:"status,omitempty"` // fail when the harness gave up on it
	Error  string  `json:"error,omitempty"`
	Runs   int     `json:"runs"`
	Mean   float64 `json:"mean_ns"`
	Std    float64 `json:"std_ns"`
	Err    float64 `json:"err_ns"`
	Best   float64 `json:"best_ns"`
	Worst  float64 `json:"worst_ns"`
	Report string  `json:"report,omitempty"` // profile mode: base64 text
	// MinNs is the least time the problem's physics floor allows on this
	// GPU (the floor times the slack), set by Evaluate; 0 when unknown.
	// Score counts a faster mean as this.
	MinNs float64 `json:"min_ns,omitempty"`
	// Tails counts the timed calls that left work running past their own
	// stream, which the worker-side timer of before issue 17 timed to the
	// device's end; kept so that reports stored then still read. The
	// judge's clock has no tails.
	Tails int `json:"tails,omitempty"`
}

// Result is the parsed POPCORN stream of one harness run.
type Result struct {
	Check      string            `json:"check"` // pass, fail, or "" when never written
	TestCount  int               `json:"test_count,omitempty"`
	Tests      []TestResult      `json:"tests,omitempty"`
	BenchCount int               `json:"benchmark_count,omitempty"`
	Benchmarks []BenchmarkResult `json:"benchmarks,omitempty"`
	// Flags are the judge's suspicions about the timings ("flag.N: RULE
	// message"): a net time at or below zero, late replies, the clock's
	// offset drifting over the run.
	Flags []Flag `json:"flags,omitempty"`
	// Extra keeps keys this parser does not model (system info, a harness's
	// own additions), so nothing the harness said is lost.
	Extra map[string]string `json:"extra,omitempty"`
}

// maxFlags bounds the flags one result stream may carry.
const maxFlags = 100

// Protocol limits: the stream comes from a process that runs alongside user
// code, so it is bounded like any untrusted input.
const (
	maxResultLine  = 1 << 20
	maxResultIndex = 10000
	maxExtraKeys   = 1000
)

// ErrProtocol is wrapped by every error about a malformed result stream.
var ErrProtocol = errors.New("malformed harness result")

// ParseResult reads the harness's key: value lines.
func ParseResult(r io.Reader) (*Result, error) {
	res := &Result{}
	tests := map[int]*TestResult{}
	benches := map[int]*BenchmarkResult{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxResultLine)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		key, value, ok := strings.Cut(text, ":")
		if !ok {
			return nil, fmt.Errorf("result line %d: %q is not key: value: %w", line, truncate(text, 80), ErrProtocol)
		}
		key = strings.TrimSpace(key)
		value = strings.TrimSpace(value)
		if err := res.set(tests, benches, key, value); err != nil {
			return nil, fmt.Errorf("result line %d: %w: %w", line, err, ErrProtocol)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read result: %w: %w", err, ErrProtocol)
	}
	for _, i := range sortedKeys(tests) {
		res.Tests = append(res.Tests, *tests[i])
	}
	for _, i := range sortedKeys(benches) {
		res.Benchmarks = append(res.Benchmarks, *benches[i])
	}
	return res, nil
}

func (res *Result) set(tests map[int]*TestResult, benches map[int]*BenchmarkResult, key, value string) error {
	switch key {
	case "check":
		res.Check = value
		return nil
	case "test-count":
		n, err := parseCount(value)
		res.TestCount = n
		return err
	case "benchmark-count":
		n, err := parseCount(value)
		res.BenchCount = n
		return err
	}
	kind, rest, _ := strings.Cut(key, ".")
	if kind == "flag" {
		rule, msg, _ := strings.Cut(value, " ")
		if rule == "" {
			return fmt.Errorf("key %q: a flag names its rule first", key)
		}
		if len(res.Flags) < maxFlags {
			res.Flags = append(res.Flags, Flag{Rule: rule, Message: unescape(msg)})
		}
		return nil
	}
	idxText, field, ok := strings.Cut(rest, ".")
	if (kind != "test" && kind != "benchmark") || !ok {
		res.extra(key, value)
		return nil
	}
	idx, err := strconv.Atoi(idxText)
	if err != nil || idx < 0 || idx >= maxResultIndex {
		return fmt.Errorf("key %q: index must be 0..%d", key, maxResultIndex-1)
	}
	if kind == "test" {
		t := tests[idx]
		if t == nil {
			t = &TestResult{Index: idx}
			tests[idx] = t
		}
		res.setTest(t, key, field, value)
		return nil
	}
	b := benches[idx]
	if b == nil {
		b = &BenchmarkResult{Index: idx}
		benches[idx] = b
	}
	return res.setBenchmark(b, key, field, value)
}

// setTest sets one field of a test's result (test.N.FIELD).
func (res *Result) setTest(t *TestResult, key, field, value string) {
	switch field {
	case "spec":
		t.Spec = value
	case "status":
		t.Status = value
	case "error":
		t.Error = unescape(value)
	case "message":
		t.Message = unescape(value)
	default:
		res.extra(key, value)
	}
}

// setBenchmark sets one field of a benchmark's result
// (benchmark.N.FIELD): counts are non-negative integers, times finite
// non-negative ns, except that the best and worst net times of the
// judge's CUDA clock may fall below zero (the judge flags them).
func (res *Result) setBenchmark(b *BenchmarkResult, key, field, value string) error {
	var dst *float64
	switch field {
	case "spec":
		b.Spec = value
	case "status":
		b.Status = value
	case "error":
		b.Error = unescape(value)
	case "report":
		b.Report = value
	case "runs", "tails":
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return fmt.Errorf("key %q: %s must be a count, got %q", key, field, truncate(value, 40))
		}
		if field == "runs" {
			b.Runs = n
		} else {
			b.Tails = n
		}
	case "mean":
		dst = &b.Mean
	case "std":
		dst = &b.Std
	case "err":
		dst = &b.Err
	case "best":
		dst = &b.Best
	case "worst":
		dst = &b.Worst
	default:
		res.extra(key, value)
	}
	if dst != nil {
		f, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || (f < 0 && field != "best" && field != "worst") {
			return fmt.Errorf("key %q: must be a finite non-negative number of ns, got %q", key, truncate(value, 40))
		}
		*dst = f
	}
	return nil
}

func (res *Result) extra(key, value string) {
	if res.Extra == nil {
		res.Extra = map[string]string{}
	}
	if len(res.Extra) < maxExtraKeys {
		res.Extra[key] = value
	}
}

func parseCount(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxResultIndex {
		return 0, fmt.Errorf("count must be 0..%d, got %q", maxResultIndex, truncate(v, 40))
	}
	return n, nil
}

// Messages travel on one line; the harness escapes newlines and backslashes.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case '\\':
				b.WriteByte('\\')
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Escape is the inverse of the harness-side escaping, for tests and for Go
// code that writes the protocol.
func Escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "\n", `\n`)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

// Score turns per-benchmark means into one number of seconds, lower being
// better, as KernelBot's compute_score does, except that no mean counts as
// less than its physics floor (MinNs): one shape faked to near zero cannot
// collapse a geometric mean.
func Score(by RankingBy, benches []BenchmarkResult) (float64, error) {
	if len(benches) == 0 {
		return 0, errors.New("score: no benchmark results")
	}
	means := make([]float64, len(benches))
	for i, b := range benches {
		if b.Runs == 0 || b.Mean <= 0 {
			return 0, fmt.Errorf("score: benchmark %d has no timed runs", b.Index)
		}
		means[i] = math.Max(b.Mean, b.MinNs)
	}
	switch by {
	case RankLast, "":
		if len(benches) != 1 {
			return 0, fmt.Errorf("score: ranking_by last needs exactly one benchmark, got %d", len(benches))
		}
		return means[0] / 1e9, nil
	case RankMean:
		sum := 0.0
		for _, m := range means {
			sum += m
		}
		return sum / float64(len(benches)) / 1e9, nil
	case RankGeom:
		logSum := 0.0
		for _, m := range means {
			logSum += math.Log(m / 1e9)
		}
		return math.Exp(logSum / float64(len(benches))), nil
	}
	return 0, fmt.Errorf("score: unknown ranking_by %q", by)
}

// ScoreErr is the standard error of Score's number, in seconds, carried
// from each benchmark's own (err_ns, the standard error of its mean): the
// spread a rerun of the same kernel would show from the timings' noise
// alone. A mean held up to its floor has no error of its own. It is 0
// when the harness gave none.
func ScoreErr(by RankingBy, benches []BenchmarkResult) float64 {
	score, err := Score(by, benches)
	if err != nil {
		return 0
	}
	var sum float64
	for _, b := range benches {
		if b.Mean < b.MinNs || b.Err <= 0 {
			continue
		}
		switch by {
		case RankGeom:
			// d(geomean)/geomean = (1/n) sum d(m_i)/m_i
			sum += (b.Err / b.Mean) * (b.Err / b.Mean)
		default: // last, mean: an arithmetic mean of n (or 1) means
			sum += b.Err * b.Err
		}
	}
	n := float64(len(benches))
	if by == RankGeom {
		return score * math.Sqrt(sum) / n
	}
	return math.Sqrt(sum) / n / 1e9
}
