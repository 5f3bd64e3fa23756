package appliance

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/appliance/api"

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

func TestSandboxRun_CLI(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	stdout, stderr, code := runCLI(t, "sandbox", "run", "--json", "--timeout", "10s", "--memory", "256M", "--", "/bin/sh", "-c", "echo hi; exit 3")
	if code != api.ExitFailed {
		t.Fatalf("exit %d, want %d; stderr %s", code, api.ExitFailed, stderr)
	}
	var doc struct {
		Verdict  string `json:"verdict"`
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if doc.Verdict != "nonzero_exit" || doc.ExitCode != 3 || doc.Stdout != "hi\n" {
		t.Errorf("result = %+v", doc)
	}
	if _, stderr, code := runCLI(t, "sandbox", "run", "--memory", "lots", "--", "/bin/true"); code != api.ExitUsage || !strings.Contains(stderr, "--memory") {
		t.Errorf("bad --memory: exit %d, %q", code, stderr)
	}
}

// TestSandbox_SameVerdicts: every bundled problem's fixtures get the same
// verdicts inside the sandbox as outside it (the problems package checks
// them outside), and the first correct fixture gets a score.
func TestSandbox_SameVerdicts(t *testing.T) {
	t.Parallel()
	rt := requireSandbox(t)
	it := testutil.RequireTorch(t)
	l := &sandboxLauncher{rt: rt, binds: harnessBinds(it, nil), limits: policies.ForMode("test", 0)}
	env := append(sandboxEnv(), "KERNELBOX_BENCH_BUDGET_S=0.05", "KERNELBOX_BENCH_WALL_S=0.5", "KERNELBOX_BENCH_MAX_REPEATS=10")
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
	l := &sandboxLauncher{rt: rt, binds: sandbox.DefaultBinds(), limits: policies.DefaultLimits()}
	out, err := l.Launch(t.Context(), problems.Launch{Dir: work, Argv: []string{"/bin/sh", "-c", "echo sandbox > f; echo 'check: pass' >&3"}, Env: sandboxEnv()})
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
	l := &sandboxLauncher{rt: rt, binds: harnessBinds(it, nil), limits: policies.ForMode("test", 0)}
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
			Device: it.Device, Env: sandboxEnv(), WorkDir: t.TempDir(), Submission: src, Seed: &seed})
		if err != nil {
			t.Fatalf("%s: Evaluate() = %v", tt.file, err)
		}
		if rep.Passed != tt.pass {
			t.Errorf("%s in the sandbox: Passed %v (%s), want %v", tt.file, rep.Passed, rep.Reason, tt.pass)
		}
	}
}

func TestDoctor(t *testing.T) {
	t.Parallel()
	stdout, _, code := runCLI(t, "doctor")
	for _, name := range []string{"root", "cgroups", "seccomp (this build)", "harness Python", "GPU"} {
		if !strings.Contains(stdout, name) {
			t.Errorf("doctor does not report %q:\n%s", name, stdout)
		}
	}
	if !strings.Contains(stdout, "✓ GPUs                   none, so the CPU backend") && !strings.Contains(stdout, "GPU 0 ") {
		t.Errorf("doctor says neither which GPUs it found nor that there are none:\n%s", stdout)
	}
	healthy := os.Geteuid() == 0 && strings.Contains(stdout, "✓ seccomp (this build)") && strings.Contains(stdout, "✓ harness Python")
	if healthy && (code != 0 || !strings.Contains(stdout, "✓ sandbox run")) {
		t.Errorf("doctor on a healthy host: exit %d\n%s", code, stdout)
	}
	if !healthy && (code != api.ExitFailed || !strings.Contains(stdout, "fix:")) {
		t.Errorf("doctor on a host that cannot sandbox: exit %d, want %d with fixes\n%s", code, api.ExitFailed, stdout)
	}
}
