package runner

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kernelbox/internal/testutil"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

func requireSandbox(t *testing.T) *sandbox.Runtime {
	t.Helper()
	rt, err := sandbox.NewRuntime(t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	switch {
	case errors.Is(err, sandbox.ErrNotRoot):
		t.Skip("needs root to start containers (CI runs as root)")
	case errors.Is(err, sandbox.ErrNoSeccomp):
		t.Skip("needs the seccomp build tag: run make test, or go test -tags seccomp")
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// TestSandbox_SameVerdicts: every bundled problem's fixtures get the same
// verdicts inside the sandbox as outside it (the problems package checks
// them outside), and the first correct fixture gets a score.
func TestSandbox_SameVerdicts(t *testing.T) {
	t.Parallel()
	rt := requireSandbox(t)
	it := testutil.RequireTorch(t)
	l, _ := NewSandboxLauncher(rt, LauncherSpec{Python: it, Limits: policies.ForMode("test", 0)})
	env := append(SandboxEnv(), "KERNELBOX_BENCH_BUDGET_S=0.05", "KERNELBOX_BENCH_WALL_S=0.5", "KERNELBOX_BENCH_MAX_REPEATS=10")
	for _, name := range problems.LibraryNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			task, err := problems.LoadTask(filepath.Join(testutil.RepoRoot(), "problems", "library", name))
			if err != nil {
				t.Fatal(err)
			}
			results, err := problems.CheckProblem(t.Context(), l, task, problems.CheckOptions{
				Python: it, Env: env, Scratch: t.TempDir(), RankCorrect: true,
			})
			if err != nil {
				t.Fatalf("CheckProblem() in the sandbox = %v", err)
			}
			for _, r := range results {
				if !r.OK {
					t.Errorf("%s (%s) in the sandbox: %s", problems.FixtureLabel(r.Path), r.Mode, r.Problems)
				}
			}
		})
	}
}

// TestSandbox_HarnessFilesStayOnHost: what a sandboxed submission writes
// into its work directory never reaches the host's copy.
func TestSandbox_HarnessFilesStayOnHost(t *testing.T) {
	t.Parallel()
	rt := requireSandbox(t)
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "f"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, _ := NewSandboxLauncher(rt, LauncherSpec{Limits: policies.DefaultLimits()})
	out, err := l.Launch(t.Context(), problems.Launch{Dir: work, Argv: []string{"/bin/sh", "-c", "echo sandbox > f; echo 'check: pass' >&3"}, Env: SandboxEnv()})
	if err != nil || string(out.Result) != "check: pass\n" {
		t.Fatalf("Launch() = %+v, %v", out, err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "f")); string(b) != "host" {
		t.Errorf("host file now %q", b)
	}
}

// TestSandbox_HostileSubmissions: the harness's own defences hold inside
// the sandbox too: a submission forging verdicts on every descriptor fails,
// and the secret seed and result descriptor stay hidden from it, in the
// environment and in the harness process's /proc entries.
func TestSandbox_HostileSubmissions(t *testing.T) {
	t.Parallel()
	rt := requireSandbox(t)
	it := testutil.RequireTorch(t)
	l, _ := NewSandboxLauncher(rt, LauncherSpec{Python: it, Limits: policies.ForMode("test", 0)})
	task, err := problems.LoadTask(filepath.Join(testutil.RepoRoot(), "problems", "library", "vectoradd"))
	if err != nil {
		t.Fatal(err)
	}
	seed := int64(4711)
	for _, tt := range []struct {
		file string
		pass bool
	}{{"cheat_fd.py", false}, {"sees_secrets.py", true}, {"reads_parent.py", true}} {
		src, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "problems", "testdata", "submissions", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := problems.Evaluate(t.Context(), l, task, problems.EvalOptions{Mode: problems.ModeTest, Python: it.Path,
			Device: it.Device, Env: SandboxEnv(), WorkDir: t.TempDir(), Submission: src, Seed: &seed})
		if err != nil {
			t.Fatalf("%s: Evaluate() = %v", tt.file, err)
		}
		if rep.Passed != tt.pass {
			t.Errorf("%s in the sandbox: Passed %v (%s), want %v", tt.file, rep.Passed, rep.Reason, tt.pass)
		}
	}
}

// TestSandbox_OOMEndsThePhase: a submission that takes more memory than
// its run may have fails at once as out of memory, naming the limit,
// under a KernelBot-format problem whose own eval.py runs each test in a
// multiprocessing pool (which waits for ever on the worker the kernel
// killed: before issue 38 such a run ran to its 120 s test limit and was
// shown as a timeout) as under our own harness.
func TestSandbox_OOMEndsThePhase(t *testing.T) {
	t.Parallel()
	rt := requireSandbox(t)
	it := testutil.RequireTorch(t)
	lim := policies.ForMode("test", 0)
	lim.Memory = 2 << 30 // the submission asks for 3 GiB
	l, _ := NewSandboxLauncher(rt, LauncherSpec{Python: it, Limits: lim})
	root := filepath.Join(testutil.RepoRoot(), "problems")
	sub, err := os.ReadFile(filepath.Join(root, "testdata", "kernelbot", "pool_py", "oom_submission.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, dir string }{
		{"kernelbot pool", filepath.Join(root, "testdata", "kernelbot", "pool_py")},
		{"our harness", filepath.Join(root, "library", "vectoradd")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			task, err := problems.LoadTask(tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			rep, err := problems.Evaluate(t.Context(), l, task, problems.EvalOptions{Mode: problems.ModeTest, Python: it.Path,
				Device: it.Device, Env: SandboxEnv(), WorkDir: t.TempDir(), Submission: sub})
			took := time.Since(start)
			if err != nil {
				t.Fatalf("Evaluate() = %v", err)
			}
			want := "test phase: ran out of memory: the kernel killed "
			if rep.Passed || !strings.HasPrefix(rep.Reason, want) || !strings.Contains(rep.Reason, "at the run's 2.0 GiB memory limit") {
				t.Errorf("Passed %v, reason %q; want a failure starting %q, at the 2.0 GiB limit", rep.Passed, rep.Reason, want)
			}
			if len(rep.Phases) != 1 || !rep.Phases[0].OOM || rep.Phases[0].TimedOut {
				t.Errorf("phases %+v; want one, out of memory and not timed out", rep.Phases)
			}
			// The kill ends the run within seconds, not at the 120 s limit;
			// the rest of the bound is torch's start on a loaded machine.
			if limit := task.TestTimeout / 2; took > limit {
				t.Errorf("Evaluate() took %v; want under %v (the test limit is %v)", took, limit, task.TestTimeout)
			}
			t.Logf("%s in %v", rep.Reason, took.Round(time.Millisecond))
		})
	}
}
