package appliance

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

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
