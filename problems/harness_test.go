package problems_test

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kernelbox/internal/testutil"
	"kernelbox/problems"
)

// These tests run the real Python harness with the real PyTorch.

func evalFile(t *testing.T, dir string, mode problems.Mode, submission string, seed *int64) *problems.Report {
	t.Helper()
	return evalWith(t, dir, submission, problems.ExecLauncher{}, problems.EvalOptions{Mode: mode, Seed: seed})
}

// evalWith evaluates the submission file on the problem in dir through
// launcher with opts, filled in with this machine's Python and device, a
// fresh work directory and (unless opts has one) this environment.
func evalWith(t *testing.T, dir, submission string, launcher problems.Launcher, opts problems.EvalOptions) *problems.Report {
	t.Helper()
	it := testutil.RequireTorch(t)
	task, err := problems.LoadTask(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(submission)
	if err != nil {
		t.Fatal(err)
	}
	opts.Python, opts.Device, opts.WorkDir, opts.Submission = it.Path, it.Device, t.TempDir(), src
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	rep, err := problems.Evaluate(t.Context(), launcher, task, opts)
	if err != nil {
		t.Fatalf("Evaluate(%s, %s) = %v", filepath.Base(submission), opts.Mode, err)
	}
	return rep
}

// shortTimeout copies a bundled problem with a test timeout of a few
// seconds, for the submissions that hang.
func shortTimeout(t *testing.T, name string) string {
	t.Helper()
	dir := libraryCopy(t, name)
	testutil.EditFile(t, filepath.Join(dir, "task.yml"), "test_timeout: 180", "test_timeout: 8")
	return dir
}

// libraryCopy copies a bundled problem (with the harness beside it) for a
// test to edit; its timeouts stay the problem's, so a loaded CI host
// cannot turn a failure the test expects into a timeout.
func libraryCopy(t *testing.T, name string) string {
	t.Helper()
	lib := t.TempDir()
	if err := os.CopyFS(lib, problems.Library()); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(lib, name)
}

func TestHarness_HostileAndBrokenSubmissions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file    string
		problem string // vectoradd when empty
		dir     string
		pass    bool
		reason  string // part of the report's reason
	}{
		{file: "cheat_fd.py", pass: false, reason: "wrote garbage on the harness's channel"},
		{file: "mutates_input.py", pass: false, reason: "the inputs are read-only"},
		{file: "syntax_error.py", pass: false, reason: "SyntaxError"},
		{file: "no_kernel.py", pass: false, reason: "defines no function custom_kernel"},
		{file: "crash.py", pass: false, reason: "the submission's process was killed by SIGSEGV"},
		{file: "lazy_subclass.py", pass: false, reason: "plain torch.Tensor"},
		{file: "flood.py", pass: true},
		{file: "kernelbot_task_import.py", pass: true}, // from task import input_t, output_t
		{file: "hang.py", dir: "short", pass: false, reason: "timed out"},
		{file: "multi_rank_raises.py", problem: "allreduce", pass: false, reason: "rank 1: Traceback"},
		{file: "multi_rank_exits.py", problem: "allreduce", pass: false, reason: "rank 1: the submission's process exited with status 3"},
		{file: "multi_rank_hangs.py", problem: "allreduce", dir: "short", pass: false, reason: "timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			name := cmp.Or(tt.problem, "vectoradd")
			dir := filepath.Join("library", name)
			if tt.dir == "short" {
				dir = shortTimeout(t, name)
			}
			rep := evalFile(t, dir, problems.ModeTest, filepath.Join("testdata", "submissions", tt.file), nil)
			if rep.Passed != tt.pass || !strings.Contains(rep.Reason, tt.reason) {
				t.Errorf("Passed = %v, Reason = %q; want %v and a reason containing %q", rep.Passed, rep.Reason, tt.pass, tt.reason)
				for _, tr := range rep.Tests {
					t.Logf("test %d: %s %s%s", tr.Index, tr.Status, tr.Error, tr.Message)
				}
			}
			for _, tr := range rep.Tests {
				if tt.file == "cheat_fd.py" && tr.Passed() {
					t.Errorf("test %d passed: a forged verdict reached the runner", tr.Index)
				}
			}
		})
	}
}

func TestHarness_BadCaseIsExit113(t *testing.T) {
	t.Parallel()
	// A case key that generate_input does not take is the problem's fault,
	// not the submission's: exit 113.
	dir := libraryCopy(t, "vectoradd")
	testutil.EditFile(t, filepath.Join(dir, "task.yml"), "{rows: 1, cols: 127, seed: 4242}", "{rows: 1, cols: 127, depth: 3, seed: 4242}")
	rep := evalFile(t, dir, problems.ModeTest, filepath.Join(dir, "templates", "torch.py"), nil)
	if rep.Passed || rep.Phases[0].ExitCode != problems.ExitBadCase || !strings.Contains(rep.Reason, "depth") {
		t.Errorf("Passed %v, exit %d, reason %q; want exit %d naming the key", rep.Passed, rep.Phases[0].ExitCode, rep.Reason, problems.ExitBadCase)
	}
}

func TestHarness_BrokenReferenceIsExit115(t *testing.T) {
	t.Parallel()
	// A reference.py that cannot import is the problem's fault: exit 115,
	// never a wrong answer charged to the submission.
	dir := libraryCopy(t, "vectoradd")
	if err := os.WriteFile(filepath.Join(dir, "reference.py"), []byte("import no_such_module\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := evalFile(t, dir, problems.ModeTest, filepath.Join(dir, "templates", "torch.py"), nil)
	if rep.Passed || rep.Phases[0].ExitCode != problems.ExitHarness || !strings.Contains(rep.Reason, "harness error") {
		t.Errorf("Passed %v, exit %d, reason %q; want exit %d, a harness error", rep.Passed, rep.Phases[0].ExitCode, rep.Reason, problems.ExitHarness)
	}
}

func TestHarness_JudgeFailureIsExit115(t *testing.T) {
	t.Parallel()
	// The reference breaking mid-run, after the worker is up, is no more
	// the submission's fault than one that cannot import: exit 115, which
	// a runner tries again (Report.HarnessFault), never a wrong result.
	dir := libraryCopy(t, "vectoradd")
	ref := filepath.Join(dir, "reference.py")
	src, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	src = append(src, []byte(`
_generate = generate_input


def generate_input(**case):
    if case.get("seed") == 4242:
        raise RuntimeError("the reference broke")
    return _generate(**case)
`)...)
	if err := os.WriteFile(ref, src, 0o644); err != nil {
		t.Fatal(err)
	}
	rep := evalFile(t, dir, problems.ModeTest, filepath.Join(dir, "templates", "torch.py"), nil)
	if rep.Passed || rep.Phases[0].ExitCode != problems.ExitHarness || !strings.Contains(rep.Reason, "the reference broke") {
		t.Errorf("Passed %v, exit %d, reason %q; want exit %d naming the reference's error", rep.Passed, rep.Phases[0].ExitCode, rep.Reason, problems.ExitHarness)
	}
	if rep.HarnessFault() == "" {
		t.Errorf("HarnessFault() is empty for a run whose judge failed")
	}
}

func TestHarness_SecretSeedIsHidden(t *testing.T) {
	t.Parallel()
	seed := int64(123456789)
	rep := evalFile(t, filepath.Join("library", "vectoradd"), problems.ModeTest, filepath.Join("testdata", "submissions", "sees_secrets.py"), &seed)
	if !rep.Passed {
		t.Fatalf("Passed = false: %s", rep.Reason)
	}
}

func TestHarness_SecretSeedChangesInputs(t *testing.T) {
	t.Parallel()
	// A private run's inputs must differ from the public ones, or a
	// submission could memorise the public answers.
	it := testutil.RequireTorch(t)
	script := `
import sys
sys.path[:0] = sys.argv[1:]
import torch, reference, eval as harness
pub = reference.generate_input(rows=3, cols=5, seed=7)[0]
sec = reference.generate_input(rows=3, cols=5, seed=harness.combine(7, 99))[0]
print("same" if torch.equal(pub, sec) else "different")
`
	lib := filepath.Join(testutil.RepoRoot(), "problems", "library")
	out, err := exec.Command(it.Path, "-c", script, filepath.Join(lib, "harness"), filepath.Join(lib, "vectoradd")).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	if got := lastLineOf(string(out)); got != "different" {
		t.Errorf("inputs under a secret seed are %q from the public ones, want different", got)
	}
}

func lastLineOf(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestHarness_PythonUnitTests(t *testing.T) {
	t.Parallel()
	it := testutil.RequireTorch(t)
	cmd := exec.Command(it.Path, "-m", "unittest", "-v", "test_harness", "test_library")
	cmd.Dir = filepath.Join("testdata", "python")
	lib := filepath.Join(testutil.RepoRoot(), "problems", "library")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(lib, "harness"), "KERNELBOX_LIBRARY="+lib, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m unittest: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestKernelBotProblem_RunsAsIs: a problem in KernelBot's format loads and
// runs unchanged (under our judge: kernelbot_test.go), its checker's
// message reaching the report.
func TestKernelBotProblem_RunsAsIs(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "kernelbot", "identity_py")
	rep := evalFile(t, dir, problems.ModeLeaderboard, filepath.Join(dir, "submission.py"), nil)
	if !rep.Passed || rep.Score == nil || rep.TimedBy != problems.TimedByJudge {
		t.Fatalf("leaderboard run of a KernelBot problem: Passed %v, Score %v, TimedBy %q, Reason %q", rep.Passed, rep.Score, rep.TimedBy, rep.Reason)
	}
	if len(rep.Benchmarks) != 1 || rep.Benchmarks[0].Spec != "size: 4096; seed: 93246" {
		t.Errorf("benchmarks = %+v, want only the last (ranking_by defaults to last)", rep.Benchmarks)
	}
	rep = evalFile(t, dir, problems.ModeTest, filepath.Join("testdata", "submissions", "identity_wrong.py"), nil)
	if rep.Passed || !strings.Contains(rep.Reason, "output differs from the input") {
		t.Errorf("wrong submission: Passed %v, Reason %q", rep.Passed, rep.Reason)
	}
}

// TestLibrary_Fixtures is `kernelbox problems check` over the whole bundled
// library on this machine's backend: every correct fixture and template
// passes, every wrong fixture fails, and the first correct fixture of each
// problem gets a scored leaderboard run.
func TestLibrary_Fixtures(t *testing.T) {
	it := testutil.RequireTorch(t)
	// Keep the timed phases short: this checks the pipeline, not speed.
	env := append(os.Environ(), "KERNELBOX_BENCH_BUDGET_S=0.05", "KERNELBOX_BENCH_WALL_S=0.5", "KERNELBOX_BENCH_MAX_REPEATS=10")
	for _, name := range problems.LibraryNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			task, err := problems.LoadTask(filepath.Join("library", name))
			if err != nil {
				t.Fatal(err)
			}
			if !task.RunsOn(it.Device) {
				t.Skipf("%s does not run on %s", name, it.Device)
			}
			results, err := problems.CheckProblem(t.Context(), problems.ExecLauncher{}, task, problems.CheckOptions{
				Python: it, Env: env, Scratch: t.TempDir(), RankCorrect: true, Templates: true,
			})
			if err != nil {
				t.Fatalf("CheckProblem() = %v", err)
			}
			ranked := false
			for _, r := range results {
				if !r.OK {
					t.Errorf("%s (%s): %s", problems.FixtureLabel(r.Path), r.Mode, r.Problems)
				}
				if r.Report != nil && r.Report.Score != nil {
					ranked = true
				}
			}
			if !ranked {
				t.Error("no fixture got a score")
			}
		})
	}
}

// requireCUDA skips unless this is the GPU machine (testutil.RequireGPU).
func requireCUDA(t *testing.T) {
	t.Helper()
	testutil.RequireGPU(t)
}

func TestHarness_CUDAErrorIsExit110(t *testing.T) {
	t.Parallel()
	requireCUDA(t)
	rep := evalFile(t, filepath.Join("library", "vectoradd"), problems.ModeTest, filepath.Join("testdata", "submissions", "cuda_assert.py"), nil)
	if rep.Passed || rep.Phases[0].ExitCode != problems.ExitCUDA {
		t.Errorf("Passed %v, exit %d (%s); want a failure with exit %d", rep.Passed, rep.Phases[0].ExitCode, rep.Reason, problems.ExitCUDA)
	}
}

func TestCUDAProblem_NativeHarness(t *testing.T) {
	t.Parallel()
	requireCUDA(t)
	if _, err := exec.LookPath("nvcc"); err != nil {
		t.Skip("needs nvcc on PATH")
	}
	dir := filepath.Join("testdata", "cuda_identity")
	rep := evalFile(t, dir, problems.ModeLeaderboard, filepath.Join(dir, "submission.cu"), nil)
	if !rep.Passed || rep.Score == nil {
		t.Fatalf("lang cu leaderboard: Passed %v, Score %v, Reason %q, phases %+v", rep.Passed, rep.Score, rep.Reason, rep.Phases)
	}
	if rep.Phases[0].Name != "compile" {
		t.Errorf("first phase %q, want compile", rep.Phases[0].Name)
	}
	rep = evalFile(t, dir, problems.ModeTest, filepath.Join(dir, "wrong.cu"), nil)
	if rep.Passed || !strings.Contains(rep.Reason, "elements differ") {
		t.Errorf("wrong lang cu submission: Passed %v, Reason %q", rep.Passed, rep.Reason)
	}
}

func TestHarness_ProfileMode(t *testing.T) {
	t.Parallel()
	rep := evalFile(t, filepath.Join("library", "softmax"), problems.ModeProfile, filepath.Join("library", "softmax", "templates", "torch.py"), nil)
	if !rep.Passed || len(rep.Benchmarks) == 0 {
		t.Fatalf("profile: Passed %v, Reason %q", rep.Passed, rep.Reason)
	}
	report, err := base64.StdEncoding.DecodeString(rep.Benchmarks[0].Report)
	if err != nil || !strings.Contains(string(report), "softmax") {
		t.Errorf("profile report = %q, %v; want a profiler table naming softmax", report, err)
	}

	// The judge checks the profiled call: a wrong kernel fails profile
	// mode as it fails a benchmark, with no report to show.
	rep = evalFile(t, filepath.Join("library", "softmax"), problems.ModeProfile, filepath.Join("library", "softmax", "solutions", "wrong", "wrong_axis.py"), nil)
	if rep.Passed || len(rep.Benchmarks) == 0 || rep.Benchmarks[0].Report != "" || rep.Phases[0].ExitCode != problems.ExitValidation {
		t.Errorf("profile of a wrong kernel: Passed %v, Reason %q, benchmarks %+v; want it failed (exit 112) with no report", rep.Passed, rep.Reason, rep.Benchmarks)
	}
}

// TestHarness_WarmStart: with a gate, our harness starts at once, imports
// torch and starts its worker, and waits at the gate before it touches
// the device (its extras say how long it prepared and waited); a
// problem's own harness (harness: own), which would not wait, is
// launched only after the gate. A failing gate ends the evaluation with
// its error.
func TestHarness_WarmStart(t *testing.T) {
	t.Parallel()
	it := testutil.RequireTorch(t)
	ours, err := problems.LoadTask(filepath.Join("library", "vectoradd"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("library", "vectoradd", "templates", "torch.py"))
	if err != nil {
		t.Fatal(err)
	}
	const hold = 4 * time.Second
	gated := 0
	gate := func(ctx context.Context) error {
		gated++
		select {
		case <-time.After(hold): // the previous run still has the device
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	spy := &gateSpy{}
	rep, err := problems.Evaluate(t.Context(), spy, ours, problems.EvalOptions{Mode: problems.ModeBenchmark,
		Python: it.Path, Device: it.Device, Env: os.Environ(), WorkDir: t.TempDir(), Submission: src, Gate: gate})
	if err != nil || !rep.Passed {
		t.Fatalf("Evaluate with a gate = %+v, %v; want passed", rep, err)
	}
	if spy.gated != 1 {
		t.Errorf("%d launches carried the gate, want the harness's one", spy.gated)
	}
	if gated != 1 {
		t.Errorf("the gate was passed %d times, want once", gated)
	}
	extra := rep.Phases[0].Result.Extra
	prepare, err1 := strconv.ParseInt(extra["judge-prepare"], 10, 64)
	waited, err2 := strconv.ParseInt(extra["judge-gate"], 10, 64)
	// The harness went on only once the gate had held for hold since it
	// started (how much of that it spent preparing depends on the
	// machine's load).
	if err1 != nil || err2 != nil || prepare <= 0 || time.Duration(prepare+waited) < hold*9/10 {
		t.Errorf("extras judge-prepare %q, judge-gate %q; want them to add up to the gate's %v", extra["judge-prepare"], extra["judge-gate"], hold)
	}

	// A KernelBot problem on its own harness (our judge would wait).
	own := kernelbotCopy(t, "identity_py", "harness: own\n")
	kb, err := problems.LoadTask(own)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := os.ReadFile(filepath.Join(own, "submission.py"))
	if err != nil {
		t.Fatal(err)
	}
	passed := false
	l := &gateSpy{}
	rep, err = problems.Evaluate(t.Context(), l, kb, problems.EvalOptions{Mode: problems.ModeTest,
		Python: it.Path, Device: it.Device, Env: os.Environ(), WorkDir: t.TempDir(), Submission: sub,
		Gate: func(context.Context) error { passed = true; return nil }})
	if err != nil || !rep.Passed || !passed {
		t.Errorf("KernelBot harness with a gate: %+v, %v, gate passed %v; want passed, the gate passed", rep, err, passed)
	}
	if l.gated != 0 || l.launches == 0 {
		t.Errorf("KernelBot harness: %d of %d launches carried the gate, want none (it is passed before)", l.gated, l.launches)
	}

	errGate := errors.New("the GPU stayed hot")
	_, err = problems.Evaluate(t.Context(), problems.ExecLauncher{}, ours, problems.EvalOptions{Mode: problems.ModeTest,
		Python: it.Path, Device: it.Device, Env: os.Environ(), WorkDir: t.TempDir(), Submission: src,
		Gate: func(context.Context) error { return errGate }})
	if !errors.Is(err, errGate) {
		t.Errorf("Evaluate with a failing gate = %v, want the gate's error", err)
	}
}

// gateSpy is ExecLauncher, counting the launches that carry a gate.
type gateSpy struct {
	launches, gated int
}

func (s *gateSpy) Launch(ctx context.Context, l problems.Launch) (problems.Outcome, error) {
	s.launches++
	if l.Gate != nil {
		s.gated++
	}
	return problems.ExecLauncher{}.Launch(ctx, l)
}
