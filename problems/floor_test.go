package problems

import (
	"math"
	"strings"
	"testing"
)

func TestParseExpr(t *testing.T) {
	t.Parallel()
	vars := map[string]float64{"rows": 4096, "cols": 1000, "k": 3}
	for _, tt := range []struct {
		src  string
		want float64
	}{
		{"3 * rows * cols * 2", 3 * 4096 * 1000 * 2},
		{"2 * rows ** 2 * k", 2 * 4096 * 4096 * 3},
		{"2 ** k ** 2", 512}, // right-associative
		{"-k + 10", 7},
		{"(rows + 1) / 2", 2048.5},
		{"max(rows, cols) - min(k, 10, 2)", 4094},
		{"ceil(cols / 3) + floor(7.9)", 334 + 7},
		{"1e3 + 2.5E-1", 1000.25},
	} {
		e, err := ParseExpr(tt.src)
		if err != nil {
			t.Errorf("ParseExpr(%q) = %v", tt.src, err)
			continue
		}
		if got, err := e.Eval(vars); err != nil || math.Abs(got-tt.want) > 1e-9*tt.want {
			t.Errorf("%q = %v, %v; want %v", tt.src, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ src, want string }{
		{"", "ends too soon"},
		{"rows *", "ends too soon"},
		{"(rows", "expected ), got"},
		{"rows cols", `unexpected "cols"`},
		{"rows % 2", `unexpected "%"`},
		{"sqrt(rows)", `unknown function "sqrt"`},
		{"ceil(rows, 2)", "ceil takes one argument, got 2"},
		{"1..2", `"1..2" is not a number`},
	} {
		if _, err := ParseExpr(tt.src); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseExpr(%q) = %v, want an error containing %q", tt.src, err, tt.want)
		}
	}
	e, _ := ParseExpr("rows / (k - 3)")
	if _, err := e.Eval(vars); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Errorf("rows / 0 = %v, want division by zero", err)
	}
}

func TestFloor_Ns(t *testing.T) {
	t.Parallel()
	bytes, _ := ParseExpr("3 * n * 2")
	flops, _ := ParseExpr("2 * n ** 3")
	c := NewCase("n", "1000", "seed", "4")
	ce := Ceilings{BytesPerSec: 6e9, BF16PerSec: 2e12, Int8PerSec: 4e12}
	for _, tt := range []struct {
		floor *Floor
		ce    Ceilings
		want  float64
	}{
		{&Floor{Bytes: bytes}, ce, 1000},                            // 6000 B at 6 GB/s
		{&Floor{FLOPs: flops, Math: "bf16"}, ce, 1e6},               // 2e9 at 2 TFLOP/s
		{&Floor{FLOPs: flops, Math: "int8"}, ce, 5e5},               // twice as fast
		{&Floor{Bytes: bytes, FLOPs: flops, Math: "bf16"}, ce, 1e6}, // the larger
		{&Floor{Bytes: bytes}, Ceilings{}, 0},                       // unknown GPU
		{nil, ce, 0},
	} {
		got, err := tt.floor.Ns(c, tt.ce)
		if err != nil || math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("Ns(%+v, %+v) = %v, %v; want %v", tt.floor, tt.ce, got, err, tt.want)
		}
	}
}

func TestApplyFloor(t *testing.T) {
	t.Parallel()
	task, err := ParseTask(t.TempDir(), "task.yml", []byte(`files: [{name: submission.py, source: "@SUBMISSION@"}]
lang: cu
config: {sources: [submission.py]}
tests: [{n: 1}]
benchmarks: [{n: 1000}, {n: 2000}]
floor: {bytes: "3 * n * 2"}
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{Benchmarks: []BenchmarkResult{{Index: 0, Spec: "n: 1000", Runs: 10, Mean: 2000}, {Index: 1, Spec: "n: 2000", Runs: 10, Mean: 500}}}
	opts := EvalOptions{Device: "cuda", Ceilings: &Ceilings{BytesPerSec: 6e9}}
	if err := applyFloor(task, opts, rep); err != nil {
		t.Fatal(err)
	}
	// Floors 1000 and 2000 ns, halved by the default slack.
	if rep.Benchmarks[0].MinNs != 500 || rep.Benchmarks[1].MinNs != 1000 {
		t.Errorf("MinNs = %v, %v; want 500, 1000", rep.Benchmarks[0].MinNs, rep.Benchmarks[1].MinNs)
	}
	if len(rep.Flags) != 1 || rep.Flags[0].Rule != FlagPhysicsFloor || !strings.Contains(rep.Flags[0].Message, "benchmark 1 (n: 2000): mean 500 ns is under 1.000 µs") {
		t.Errorf("Flags = %+v, want benchmark 1 only", rep.Flags)
	}
	score, err := Score(RankGeom, rep.Benchmarks)
	if want := math.Sqrt(2000e-9 * 1000e-9); err != nil || math.Abs(score-want) > 1e-15 {
		t.Errorf("Score = %v, %v; want %v (benchmark 1 counted at its floor)", score, err, want)
	}

	// Without ceilings (an unknown GPU, the CPU backend) nothing changes.
	rep2 := &Report{Benchmarks: []BenchmarkResult{{Index: 0, Runs: 1, Mean: 1}}}
	if err := applyFloor(task, EvalOptions{}, rep2); err != nil || rep2.Benchmarks[0].MinNs != 0 || rep2.Flags != nil {
		t.Errorf("applyFloor without ceilings = %v, %+v", err, rep2)
	}
}

func TestFloor_ReadNs(t *testing.T) {
	t.Parallel()
	reads, _ := ParseExpr("2 * n * 2")
	c := NewCase("n", "1500", "seed", "4")
	for _, tt := range []struct {
		name  string
		floor *Floor
		ce    Ceilings
		want  float64
	}{
		{"reads", &Floor{Reads: reads}, Ceilings{ReadBytesPerSec: 6e9}, 1000}, // 6000 B at 6 GB/s
		{"no read ceiling", &Floor{Reads: reads}, Ceilings{BytesPerSec: 6e9}, 0},
		{"no reads", &Floor{}, Ceilings{ReadBytesPerSec: 6e9}, 0},
		{"no floor", nil, Ceilings{ReadBytesPerSec: 6e9}, 0},
	} {
		got, err := tt.floor.ReadNs(c, tt.ce)
		if err != nil || math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("%s: ReadNs() = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

// TestApplyFloor_Reads: the read floor flags a mean under it with no
// slack, and only where our judge evicts the inputs from L2 before each
// call (a GPU, our Python judge) and the ceilings give a read bandwidth.
func TestApplyFloor_Reads(t *testing.T) {
	t.Parallel()
	task := func(harness string) *Task {
		t.Helper()
		// reference.py is among the files so that a KernelBot-format
		// problem is one our judge takes.
		task, err := LoadTask(writeProblem(t, `files:
  - {name: submission.py, source: "@SUBMISSION@"}
  - {name: reference.py, source: reference.py}
  - {name: eval.py, source: eval.py}
lang: py
config: {main: eval.py}
harness: `+harness+`
tests: [{n: 1, seed: 1}]
benchmarks: [{n: 1000, seed: 2}]
floor: {bytes: "3 * n * 2", reads: "2 * n * 2"}
`))
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	judged, own := task("kernelbot"), task("own")
	gpuCe := &Ceilings{BytesPerSec: 6e9, ReadBytesPerSec: 6e9}
	// At 6 GB/s: the floor 1000 ns (500 at the default slack), the read
	// floor 666.7 ns.
	const readFloor = 4000 / 6e9 * 1e9
	for _, tt := range []struct {
		name    string
		task    *Task
		device  string
		ce      *Ceilings
		slack   float64
		mean    float64
		wantMin float64
		wantMsg string // "": not flagged
	}{
		{"under the read floor", judged, "cuda", gpuCe, 0, 600, readFloor, "mean 600 ns is under 667 ns, the least time in which this device's memory can deliver the inputs at its peak bandwidth, with no slack: the read floor"},
		{"over the read floor, under the floor", judged, "cuda", gpuCe, 0, 700, readFloor, ""},
		{"under both", judged, "cuda", gpuCe, 0, 100, readFloor, "the read floor"},
		{"slack above the read floor", judged, "cuda", gpuCe, 0.9, 800, 900, "mean 800 ns is under 900 ns, 90 % of the least time"},
		{"no read ceiling", judged, "cuda", &Ceilings{BytesPerSec: 6e9}, 0, 600, 500, ""},
		{"cpu: no flush", judged, "cpu", gpuCe, 0, 600, 500, ""},
		{"cpu: under the slack floor", judged, "cpu", gpuCe, 0, 400, 500, "mean 400 ns is under 500 ns, 50 % of the least time"},
		{"own harness: no flush", own, "cuda", gpuCe, 0, 600, 500, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rep := &Report{Benchmarks: []BenchmarkResult{{Index: 0, Runs: 10, Mean: tt.mean}}}
			if err := applyFloor(tt.task, EvalOptions{Device: tt.device, Ceilings: tt.ce, FloorSlack: tt.slack}, rep); err != nil {
				t.Fatal(err)
			}
			if got := rep.Benchmarks[0].MinNs; math.Abs(got-tt.wantMin) > 1e-6 {
				t.Errorf("MinNs = %v, want %v", got, tt.wantMin)
			}
			switch {
			case tt.wantMsg == "" && len(rep.Flags) > 0:
				t.Errorf("Flags = %+v, want none", rep.Flags)
			case tt.wantMsg != "" && (len(rep.Flags) != 1 || rep.Flags[0].Rule != FlagPhysicsFloor || !strings.Contains(rep.Flags[0].Message, tt.wantMsg)):
				t.Errorf("Flags = %+v, want one PHYSICS_FLOOR containing %q", rep.Flags, tt.wantMsg)
			}
		})
	}
}
