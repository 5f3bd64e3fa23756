package problems_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/internal/testutil"
	"kernelbox/policies"
	"kernelbox/problems"
)

// The tests of this file run only on the GPU machine (testutil.RequireGPU:
// KERNELBOX_TEST_GPU=1 and a PyTorch that sees CUDA); `make test/gpu` and
// the device call of docs/performance.md run them. Their names end in
// OnGPU so that one -run pattern picks them.

// TestLibrary_TemplatesOnGPU: every template of every single-GPU bundled
// problem (torch, Triton, CUDA through load_inline) passes in leaderboard
// mode on the GPU with a score, the judge flags none of its timings, and
// the scanner finds nothing in it: what a contestant starts from must be
// neither failed nor held for review. The multi-GPU problems need a gang
// of GPUs (TestDaemon_MultiGPU runs them on CPU ranks).
func TestLibrary_TemplatesOnGPU(t *testing.T) {
	t.Parallel()
	testutil.RequireGPU(t)
	tasks, err := filepath.Glob(filepath.Join("library", "*", "task.yml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		dir := filepath.Dir(task)
		if tk, err := problems.LoadTask(dir); err != nil {
			t.Fatal(err)
		} else if tk.MultiGPU {
			continue
		}
		templates, err := filepath.Glob(filepath.Join(dir, "templates", "*.py"))
		if err != nil || len(templates) == 0 {
			t.Errorf("%s has no templates: %v", dir, err)
		}
		for _, f := range templates {
			n++
			t.Run(filepath.Base(dir)+"/"+filepath.Base(f), func(t *testing.T) {
				t.Parallel()
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if fs := policies.Scan(src); len(fs) > 0 {
					t.Errorf("policies.Scan(%s) = %v, want no finding", f, fs)
				}
				rep := evalFile(t, dir, problems.ModeLeaderboard, f, nil)
				if !rep.Passed || rep.Score == nil {
					t.Fatalf("leaderboard mode: passed %v, score %v (%s); want passed with a score", rep.Passed, rep.Score, rep.Reason)
				}
				if len(rep.Flags) > 0 {
					t.Errorf("leaderboard mode flagged %+v, want no flag", rep.Flags)
				}
			})
		}
	}
	if n < 30 {
		t.Errorf("found %d templates of single-GPU problems, want at least 30", n)
	}
}

// TestCheatCorpus_OnGPU: each cheat of testdata/cheats whose "# corpus:
// gpu" line says what it does on a GPU does that in leaderboard mode on
// vectoradd: "no gain" (it fails, or scores no better than noGain times
// the honest solution), or else a wrong result (it fails). The scan,
// fail and nogain lines are TestCheatCorpus's, which runs on CUDA too
// when the GPU machine's PyTorch sees one.
func TestCheatCorpus_OnGPU(t *testing.T) {
	t.Parallel()
	testutil.RequireGPU(t)
	files, err := filepath.Glob(filepath.Join("testdata", "cheats", "*.py"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range corpusExpectations(t, f, src) {
			if e.kind != "gpu" {
				continue
			}
			n++
			t.Run(filepath.Base(f), func(t *testing.T) {
				t.Parallel()
				rep := evalFile(t, filepath.Join("library", "vectoradd"), problems.ModeLeaderboard, f, nil)
				if !strings.HasPrefix(e.text, "no gain") {
					if rep.Passed {
						t.Errorf("passed (score %v); want it failed: %s", rep.Score, e.text)
					}
					return
				}
				if !rep.Passed {
					return // no score at all
				}
				got, honest := benchScore(t, rep), honestScore(t, "vectoradd", problems.ModeLeaderboard)
				if got < noGain*honest {
					t.Errorf("scored %.3g s against the honest solution's %.3g s (%.2fx); want no better than %.1fx (%s)",
						got, honest, got/honest, noGain, e.text)
				}
			})
		}
	}
	if n == 0 {
		t.Error("no cheat has a # corpus: gpu line")
	}
}

// findNCU is Nsight Compute's ncu on PATH or under /opt/nvidia (where the
// CUDA toolkit installs it without a link), the last there in name order.
func findNCU() string {
	if p, err := exec.LookPath("ncu"); err == nil {
		return p
	}
	found, _ := filepath.Glob("/opt/nvidia/nsight-compute/*/ncu")
	if len(found) == 0 {
		return ""
	}
	return found[len(found)-1]
}

// TestProfile_NCUOnGPU: profile mode under the real ncu (TestProfile_UnderNCU
// has a stand-in): the report is kept, its summary names only the
// worker's kernels in the custom_kernel range (none of the judge's input
// copies, zero_ or L2 flushes), and a wrong kernel fails profile mode as
// it fails a benchmark.
func TestProfile_NCUOnGPU(t *testing.T) {
	t.Parallel()
	testutil.RequireGPU(t)
	ncu := findNCU()
	if ncu == "" {
		t.Skip("needs Nsight Compute: no ncu on PATH or under /opt/nvidia/nsight-compute")
	}
	eval := func(file string) *problems.Report {
		dir := filepath.Join("library", "vectoradd")
		return evalWith(t, dir, filepath.Join(dir, file), problems.ExecLauncher{},
			problems.EvalOptions{Mode: problems.ModeProfile, Profiler: &problems.Profiler{NCU: ncu}})
	}
	rep := eval(filepath.Join("templates", "triton.py"))
	if !rep.Passed || rep.Profile == nil {
		t.Fatalf("the Triton template under %s: passed %v, profile %+v (%s)", ncu, rep.Passed, rep.Profile, rep.Reason)
	}
	if st, err := os.Stat(rep.Profile.File); err != nil || st.Size() == 0 || rep.Profile.Kernels == 0 {
		t.Errorf("profile = %+v (report: %v); want a kept report of at least one kernel", rep.Profile, err)
	}
	for _, line := range strings.Split(rep.Profile.Summary, "\n") {
		if strings.HasPrefix(line, "kernel ") && !strings.Contains(line, "add_kernel") {
			t.Errorf("ncu profiled %q, want only the template's add_kernel:\n%s", line, rep.Profile.Summary)
		}
	}
	if rep := eval(filepath.Join("solutions", "wrong", "fp32_output.py")); rep.Passed {
		t.Errorf("a wrong kernel passed profile mode under ncu; want it failed")
	}
}
