package policies

// The static scanner: patterns in a submission's source that belong to the
// documented ways of faking a fast or correct kernel (timer and harness
// patching, forged results, caches keyed by identity, side streams,
// threads, package installs; ../shared/anchors/evalharness.md §3). It is a
// first line only: the harness and the runner must hold without it, and a
// pattern that also has honest uses flags the submission for an organiser
// instead of refusing it.

import (
	"bytes"
	"fmt"
	"regexp"
	"regexp/syntax"
)

// ScanVerdict is what a finding does to a submission.
type ScanVerdict string

// Verdicts, the stronger last.
const (
	ScanOK     ScanVerdict = ""
	ScanFlag   ScanVerdict = "flag"   // accepted, kept out of the rankings until an organiser clears it
	ScanReject ScanVerdict = "reject" // refused at submission
)

// ScanRule is one pattern family.
type ScanRule struct {
	ID      string
	Verdict ScanVerdict
	Message string // what it means, for the contestant
	// Patterns match one line each (case-sensitive, as code is).
	Patterns []*regexp.Regexp
}

// Finding is one rule matching one line, or with Line 0 one of the
// runner's flags about a run's timings (problems.Flag).
type Finding struct {
	Rule    string      `json:"rule"`
	Verdict ScanVerdict `json:"verdict"`
	Line    int         `json:"line"`
	Text    string      `json:"text"` // the line, trimmed and cut
	Message string      `json:"message"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%s (line %d: %s): %s", f.Rule, f.Line, f.Text, f.Message)
}

func res(patterns ...string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		out[i] = regexp.MustCompile(p)
	}
	return out
}

// ScanRules are the rules, in the order findings are reported.
var ScanRules = []ScanRule{
	{ID: "TIMER_PATCH", Verdict: ScanReject,
		Message: "replaces a timing or synchronisation function; the harness's timers are not to be touched",
		Patterns: res(
			`\b(torch\.cuda\.)?Event\.(elapsed_time|record|synchronize|query|wait)\s*=[^=]`,
			`\btorch\.cuda\.(Event|synchronize|current_stream)\s*=[^=]`,
			`\btime\.(perf_counter|perf_counter_ns|time|time_ns|monotonic|monotonic_ns|process_time)\s*=[^=]`,
			`setattr\(\s*(torch\.cuda|time|torch\.cuda\.Event)\b`,
			`(dlsym|RTLD_NEXT|RTLD_DEFAULT).*\bcu(da)?EventElapsedTime`,
			`\bcu(da)?EventElapsedTime\b.*(dlsym|RTLD_NEXT|RTLD_DEFAULT)`)},
	{ID: "HARNESS_PATCH", Verdict: ScanReject,
		Message: "reaches into the harness or the reference (its input generator, checker or statistics); a kernel uses only its input",
		Patterns: res(
			`^\s*(import|from)\s+(eval|kbutils|reference)\b`,
			`\bsys\.modules\s*\[`,
			`\b__import__\(\s*['"](eval|kbutils|reference)['"]`,
			`\b(check_implementation|generate_input|ref_kernel|calculate_stats|clear_l2_cache)\s*=[^=]`,
			`\btorch\.(allclose|testing\.assert_close|equal)\s*=[^=]`,
			`\btorch\.(randn|rand|randint|randperm|normal|randn_like|rand_like|randint_like|Generator)\s*=[^=]`)},
	{ID: "RESULT_FORGERY", Verdict: ScanReject,
		Message: "writes to the harness's result channel or prints result lines; results come only from the harness",
		Patterns: res(
			`POPCORN_FD`,
			`/proc/self/fd`,
			`\bos\.(write|fdopen|dup2?)\(\s*([3-9]|[1-9][0-9]+)\b`,
			`["'](check|benchmark\.\d+\.(mean|runs|best)|test\.\d+\.status)\s*:\s*`)},
	{ID: "PACKAGE_INSTALL", Verdict: ScanReject,
		Message: "installs packages; the sandbox has no network and a run has what the problem gives it",
		Patterns: res(
			`\bpip\s+install\b`,
			`-m\s+pip\b|['"]pip['"]\s*,\s*['"]install['"]`,
			`\bensurepip\b`)},
	{ID: "EVALUATOR_INSPECTION", Verdict: ScanFlag,
		Message: "inspects the process around it (frames, the garbage collector, arguments, environment); honest kernels do not need to",
		Patterns: res(
			`\bgc\.get_(objects|referrers|referents)\(`,
			`\bsys\._getframe\(`,
			`\binspect\.(stack|currentframe|getouterframes)\(`,
			`\.(f_globals|f_locals|f_back|__code__)\b`,
			`\bsys\.argv\b`,
			`\bos\.environ\b.*POPCORN`)},
	{ID: "IDENTITY_CACHE", Verdict: ScanFlag,
		Message: "caches results keyed by object identity, pointer or call; a kernel must compute every call's output",
		// A subscript or lookup by id() or data_ptr(), not a list of
		// pointers passed to a launch.
		Patterns: res(
			`\w\[[^\]]*(\bid\(|\.data_ptr\(\))[^\]]*\]`,
			`\.(get|setdefault|__contains__)\([^)]*(\bid\(|\.data_ptr\(\))`,
			`(\bid\(|\.data_ptr\(\))[^)]*\)\s+(not\s+)?in\s+\w`)},
	{ID: "SIDE_STREAM", Verdict: ScanFlag,
		Message: "uses CUDA streams; work left on a side stream can escape the timing, so an organiser checks it",
		Patterns: res(
			`\btorch\.cuda\.(Stream|ExternalStream|stream|set_stream)\b`,
			`\b(wait_stream|record_stream)\(`,
			`\bcuda(Stream|StreamCreate|StreamCreateWithFlags|StreamCreateWithPriority)\b`,
			`\bat::cuda::getStreamFromPool\b`)},
	{ID: "THREADS", Verdict: ScanFlag,
		Message: "starts threads or processes, which can work outside the timed call",
		Patterns: res(
			`^\s*(import|from)\s+(threading|_thread|multiprocessing|concurrent\.futures|subprocess)\b`,
			`\bos\.(system|popen|fork|exec[lv]p?e?|spawn[lv]p?e?)\(`,
			`\bstd::(thread|async)\b`,
			`\bpthread_create\b`)},
	{ID: "LAZY_OUTPUT", Verdict: ScanFlag,
		Message: "defines a tensor subclass or dispatch hook, the way lazy results defer work into the untimed check",
		Patterns: res(
			`\bclass\s+\w+\s*\(\s*(torch\.)?Tensor\s*\)`,
			`\b_make_subclass\(`,
			`\b__torch_(function|dispatch)__\b`)},
	{ID: "NATIVE_HOOK", Verdict: ScanFlag,
		Message: "loads native symbols by hand or changes memory protection; harness functions can be detoured that way",
		Patterns: res(
			`^\s*(import\s+ctypes|from\s+ctypes\s+import)\b`,
			`\b(dlsym|dlopen|mprotect|ptrace|process_vm_writev)\s*\(`)},
}

// Scan reports every rule that matches a line of code. Full-line comments
// are skipped (a comment that says "no streams here" is not a stream);
// strings are not, because native code hides in load_inline's strings.
//
// Its cost is bounded for hostile input (issue 18): a pattern runs only on
// lines holding one of its literals, the regular expressions together read
// at most scanBudget bytes, and code that would need more is flagged
// SCAN_LIMIT for an organiser rather than read further. Each rule reports
// its first maxFindingsPerRule lines.
func Scan(code []byte) []Finding {
	out, _ := scan(code, scanBudget)
	return out
}

// scan is Scan with a budget, returning what is left of it.
func scan(code []byte, budget int) ([]Finding, int) {
	live := livePatterns(code)
	var out []Finding
	perRule := make(map[string]int)
	for n := 1; len(code) > 0; n++ {
		line := code
		if i := bytes.IndexByte(code, '\n'); i >= 0 {
			line, code = code[:i], code[i+1:]
		} else {
			code = nil
		}
		trimmed := bytes.TrimSpace(line)
		if bytes.HasPrefix(trimmed, []byte("#")) || bytes.HasPrefix(trimmed, []byte("//")) {
			continue
		}
		for _, lr := range live {
			if perRule[lr.rule.ID] >= maxFindingsPerRule {
				continue
			}
			hit, ok := lr.match(line, &budget)
			if !ok {
				return append(out, limitFinding(n)), 0
			}
			if hit {
				perRule[lr.rule.ID]++
				out = append(out, finding(lr.rule, n, trimmed))
			}
		}
	}
	return out, budget
}

const (
	// scanBudget is how many bytes the regular expressions may read in
	// all: at most about 0.15 s of CPU, and far more than honest code
	// needs (TestScan_Budget).
	scanBudget = 4 << 20
	// maxFindingsPerRule keeps a file of ten thousand "import threading"
	// lines from storing ten thousand findings.
	maxFindingsPerRule = 3
)

// ScanLimit is the rule of the finding that says the scanner stopped.
const ScanLimit = "SCAN_LIMIT"

func limitFinding(line int) Finding {
	return Finding{Rule: ScanLimit, Verdict: ScanFlag, Line: line,
		Message: "the scanner stopped here: the code has more matching text than it reads; an organiser reviews the rest"}
}

func finding(r *ScanRule, line int, trimmed []byte) Finding {
	text := string(trimmed)
	if len(text) > 80 {
		text = text[:77] + "..."
	}
	return Finding{Rule: r.ID, Verdict: r.Verdict, Line: line, Text: text, Message: r.Message}
}

// liveRule is a rule with the patterns whose literals occur in the code.
type liveRule struct {
	rule     *ScanRule
	patterns []prefiltered
}

// match reports whether a pattern of the rule matches line, charging the
// regular expressions' reading to budget; ok is false once it is spent.
func (lr liveRule) match(line []byte, budget *int) (hit, ok bool) {
	for _, p := range lr.patterns {
		if !p.mayMatch(line) {
			continue
		}
		if *budget -= len(line) + 1; *budget < 0 {
			return false, false
		}
		if p.re.Match(line) {
			return true, true
		}
	}
	return false, true
}

// livePatterns keeps, rule by rule, the patterns that can match somewhere
// in the code, so most lines meet no regular expression at all.
func livePatterns(code []byte) []liveRule {
	var out []liveRule
	for i := range ScanRules {
		lr := liveRule{rule: &ScanRules[i]}
		for _, p := range prefilters[i] {
			if p.mayMatch(code) {
				lr.patterns = append(lr.patterns, p)
			}
		}
		if len(lr.patterns) > 0 {
			out = append(out, lr)
		}
	}
	return out
}

// prefiltered is a pattern with literals of which every match holds one
// (none known: the pattern always runs).
type prefiltered struct {
	re      *regexp.Regexp
	needles [][]byte
}

func (p prefiltered) mayMatch(b []byte) bool {
	if p.needles == nil {
		return true
	}
	for _, n := range p.needles {
		if bytes.Contains(b, n) {
			return true
		}
	}
	return false
}

// prefilters are ScanRules' patterns with their literals, rule by rule.
var prefilters = func() [][]prefiltered {
	out := make([][]prefiltered, len(ScanRules))
	for i, r := range ScanRules {
		for _, re := range r.Patterns {
			out[i] = append(out[i], prefiltered{re: re, needles: needlesOf(re)})
		}
	}
	return out
}()

func needlesOf(re *regexp.Regexp) [][]byte {
	parsed, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil // cannot happen for a compiled pattern; run it always
	}
	var out [][]byte
	for _, s := range needles(parsed.Simplify()) {
		out = append(out, []byte(s))
	}
	return out
}

// needles returns strings of which every match of re contains one, or nil
// when it knows none: a concatenation's best part, an alternation's
// parts' together, a literal itself.
func needles(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil
		}
		return []string{string(re.Rune)}
	case syntax.OpCapture, syntax.OpPlus:
		return needles(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return needles(re.Sub[0])
		}
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			n := needles(sub)
			if n == nil {
				return nil
			}
			out = append(out, n...)
		}
		return out
	case syntax.OpConcat:
		var best []string
		for _, sub := range re.Sub {
			if n := needles(sub); n != nil && (best == nil || shortest(n) > shortest(best)) {
				best = n
			}
		}
		return best
	}
	return nil
}

func shortest(ss []string) int {
	m := -1
	for _, s := range ss {
		if m < 0 || len(s) < m {
			m = len(s)
		}
	}
	return m
}

// Worst is the strongest verdict among findings.
func Worst(fs []Finding) ScanVerdict {
	v := ScanOK
	for _, f := range fs {
		switch {
		case f.Verdict == ScanReject:
			return ScanReject
		case f.Verdict == ScanFlag:
			v = ScanFlag
		}
	}
	return v
}
