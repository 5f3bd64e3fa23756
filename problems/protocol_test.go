package problems

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sampleResult = `test-count: 2
test.0.spec: size: 127; seed: 1
test.0.status: pass
test.1.spec: size: 128; seed: 2
test.1.status: fail
test.1.message: 3 of 10 elements differ\nat (0,): got 1, expected 2
benchmark-count: 1
benchmark.0.spec: size: 4096; seed: 3
benchmark.0.runs: 100
benchmark.0.mean: 1500.5
benchmark.0.std: 10
benchmark.0.err: 1
benchmark.0.best: 1400
benchmark.0.worst: 1700
benchmark.0.median: 1490
check: fail
`

func TestParseResult(t *testing.T) {
	t.Parallel()
	got, err := ParseResult(strings.NewReader(sampleResult))
	if err != nil {
		t.Fatalf("ParseResult() = %v", err)
	}
	want := &Result{
		Check:     "fail",
		TestCount: 2,
		Tests: []TestResult{
			{Index: 0, Spec: "size: 127; seed: 1", Status: "pass"},
			{Index: 1, Spec: "size: 128; seed: 2", Status: "fail", Message: "3 of 10 elements differ\nat (0,): got 1, expected 2"},
		},
		BenchCount: 1,
		Benchmarks: []BenchmarkResult{{Index: 0, Spec: "size: 4096; seed: 3", Runs: 100, Mean: 1500.5, Std: 10, Err: 1, Best: 1400, Worst: 1700}},
		Extra:      map[string]string{"benchmark.0.median": "1490"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseResult() mismatch (-want +got):\n%s", diff)
	}
}

func TestParseResult_Malformed(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"no colon":       "check pass\n",
		"bad index":      "test.x.status: pass\n",
		"huge index":     "test.99999999.status: pass\n",
		"negative mean":  "benchmark.0.mean: -3\n",
		"nan mean":       "benchmark.0.mean: NaN\n",
		"bad runs":       "benchmark.0.runs: many\n",
		"bad tails":      "benchmark.0.tails: garbage\n",
		"bad count":      "test-count: -1\n",
		"too long line":  "check: " + strings.Repeat("x", maxResultLine+1) + "\n",
		"inf best value": "benchmark.1.best: +Inf\n",
		"negative std":   "benchmark.0.std: -1\n",
		"flag no rule":   "flag.0: \n",
	} {
		if _, err := ParseResult(strings.NewReader(in)); err == nil || !errors.Is(err, ErrProtocol) {
			t.Errorf("ParseResult(%s) = %v, want an ErrProtocol error", name, err)
		}
	}
}

func TestEscape_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "two\nlines", `back\slash`, `\n literal`, "trailing\\"} {
		if got := unescape(Escape(s)); got != s {
			t.Errorf("unescape(Escape(%q)) = %q", s, got)
		}
	}
}

func TestScore(t *testing.T) {
	t.Parallel()
	b := func(means ...float64) []BenchmarkResult {
		var out []BenchmarkResult
		for i, m := range means {
			out = append(out, BenchmarkResult{Index: i, Runs: 3, Mean: m})
		}
		return out
	}
	tests := []struct {
		by      RankingBy
		benches []BenchmarkResult
		want    float64
		wantErr bool
	}{
		{RankLast, b(2e9), 2, false},
		{RankLast, b(1e9, 2e9), 0, true},
		{RankMean, b(1e9, 3e9), 2, false},
		{RankGeom, b(1e9, 4e9), 2, false},
		{RankGeom, b(1e3, 1e5), 1e-5, false},
		{RankGeom, nil, 0, true},
		{RankMean, []BenchmarkResult{{Runs: 0, Mean: 0}}, 0, true},
		{"best", b(1), 0, true},
		// A shape faked to 1 ns counts as its physics floor (MinNs), 1e5.
		{RankGeom, []BenchmarkResult{{Runs: 3, Mean: 1e5}, {Index: 1, Runs: 3, Mean: 1, MinNs: 1e5}}, 1e-4, false},
		{RankGeom, []BenchmarkResult{{Runs: 3, Mean: 1e3, MinNs: 10}, {Index: 1, Runs: 3, Mean: 1e5}}, 1e-5, false},
	}
	for _, tt := range tests {
		got, err := Score(tt.by, tt.benches)
		if (err != nil) != tt.wantErr || math.Abs(got-tt.want) > 1e-12*math.Max(1, tt.want) {
			t.Errorf("Score(%s, %v) = %v, %v; want %v (error %v)", tt.by, tt.benches, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestScoreErr(t *testing.T) {
	t.Parallel()
	be := func(mean, err float64) BenchmarkResult { return BenchmarkResult{Runs: 10, Mean: mean, Err: err} }
	tests := []struct {
		name    string
		by      RankingBy
		benches []BenchmarkResult
		want    float64 // seconds
	}{
		{"last: its own error", RankLast, []BenchmarkResult{be(2e9, 0.1e9)}, 0.1},
		// mean of two: sqrt(0.3² + 0.4²) / 2 = 0.25
		{"mean: errors add in quadrature", RankMean, []BenchmarkResult{be(1e9, 0.3e9), be(3e9, 0.4e9)}, 0.25},
		// geomean 2 s; relative errors 3 % and 4 %: 2 * 5 % / 2 = 0.05
		{"geom: relative errors", RankGeom, []BenchmarkResult{be(1e9, 0.03e9), be(4e9, 0.16e9)}, 0.05},
		{"no errors given", RankGeom, []BenchmarkResult{be(1e9, 0), be(4e9, 0)}, 0},
		// The floored shape's own noise does not count: only 4e9's 4 %.
		{"floored mean", RankGeom, []BenchmarkResult{{Runs: 3, Mean: 1, Err: 1, MinNs: 1e9}, be(4e9, 0.16e9)}, 0.04},
		{"no score, no error", RankLast, []BenchmarkResult{be(1e9, 1e8), be(1e9, 1e8)}, 0},
	}
	for _, tt := range tests {
		if got := ScoreErr(tt.by, tt.benches); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: ScoreErr = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseCases_RoundTrip(t *testing.T) {
	t.Parallel()
	cases := []Case{NewCase("size", "127", "seed", "-5"), NewCase("m", "1", "flag", "true", "dtype", "bf16", "scale", "0.5")}
	text := FormatCases(cases)
	if want := "size: 127; seed: -5\nm: 1; flag: true; dtype: bf16; scale: 0.5\n"; text != want {
		t.Errorf("FormatCases() = %q, want %q", text, want)
	}
	got, err := ParseCases(strings.NewReader(text))
	if err != nil {
		t.Fatalf("ParseCases() = %v", err)
	}
	if diff := cmp.Diff(cases, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"size 127\n", "a: 1; a: 2\n", "9x: 1\n", "a: b c\n", "a:\n"} {
		if _, err := ParseCases(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseCases(%q) = nil error", bad)
		}
	}
}

func FuzzParseResult(f *testing.F) {
	f.Add([]byte(sampleResult))
	f.Add([]byte("check: pass\nbenchmark.3.report: aGVsbG8=\n"))
	f.Add([]byte("test.0.error: \\\\n\\n\\\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := ParseResult(strings.NewReader(string(data)))
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("ParseResult() error %v does not wrap ErrProtocol", err)
			}
			return
		}
		for i := 1; i < len(res.Tests); i++ {
			if res.Tests[i-1].Index >= res.Tests[i].Index {
				t.Fatalf("tests out of order: %+v", res.Tests)
			}
		}
		for _, b := range res.Benchmarks {
			if b.Mean < 0 || math.IsNaN(b.Mean) || math.IsInf(b.Mean, 0) {
				t.Fatalf("benchmark mean %v escaped validation", b.Mean)
			}
		}
	})
}

func FuzzParseCases(f *testing.F) {
	f.Add("size: 127; seed: 1\n\nm: 3\n")
	f.Add("a: -1.5e3; b: true")
	f.Fuzz(func(t *testing.T, text string) {
		cases, err := ParseCases(strings.NewReader(text))
		if err != nil {
			return
		}
		back, err := ParseCases(strings.NewReader(FormatCases(cases)))
		if err != nil {
			t.Fatalf("ParseCases(FormatCases(%v)) = %v", cases, err)
		}
		if diff := cmp.Diff(cases, back); diff != "" && len(cases) > 0 {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}

// TestParseResult_Flags: the judge's flag lines become the result's
// flags, and a net time below zero is a best time, not a broken stream.
func TestParseResult_Flags(t *testing.T) {
	t.Parallel()
	in := "benchmark.0.mean: 1200\nbenchmark.0.best: -300\n" +
		"flag.0: NET_NONPOSITIVE n: 1: 1 of 30 net times at or below zero\n" +
		"flag.1: CLOCK_DRIFT the offset was 300000 ns\\nthen 360000 ns\n"
	res, err := ParseResult(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Flag{{Rule: FlagNetNonPositive, Message: "n: 1: 1 of 30 net times at or below zero"},
		{Rule: FlagClockDrift, Message: "the offset was 300000 ns\nthen 360000 ns"}}
	if diff := cmp.Diff(want, res.Flags); diff != "" {
		t.Errorf("flags (-want +got):\n%s", diff)
	}
	if res.Benchmarks[0].Best != -300 {
		t.Errorf("best = %v, want -300", res.Benchmarks[0].Best)
	}
}
