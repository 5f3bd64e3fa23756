package problems_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/internal/testutil"
	"kernelbox/problems"
)

// These tests run KernelBot-format problems (testdata/kernelbot) with the
// real Python harness and PyTorch: under our judge by default, under
// their own eval.py when the organiser opts in (harness: own).

// kernelbotCopy copies the KernelBot fixture family (its shared eval.py
// and utils.py with it) and returns the copy's problem dir, with extra
// appended to its task.yml.
func kernelbotCopy(t *testing.T, dir, extra string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join("testdata", "kernelbot"))); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, filepath.FromSlash(dir))
	f, err := os.OpenFile(filepath.Join(p, "task.yml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(extra); err != nil {
		t.Fatal(err)
	}
	return p
}

// evalSpy is evalFile through a launcher that records each launch's argv.
func evalSpy(t *testing.T, dir string, mode problems.Mode, submission string) (*problems.Report, *argvSpy) {
	t.Helper()
	spy := &argvSpy{}
	rep := evalWith(t, dir, submission, spy, problems.EvalOptions{Mode: mode,
		Env: append(os.Environ(), "KERNELBOX_BENCH_BUDGET_S=0.05", "KERNELBOX_BENCH_WALL_S=0.5")})
	return rep, spy
}

// argvSpy is ExecLauncher, keeping each launch's argv and the eval.py it ran.
type argvSpy struct {
	argvs [][]string
	evals []string
}

func (s *argvSpy) Launch(ctx context.Context, l problems.Launch) (problems.Outcome, error) {
	s.argvs = append(s.argvs, l.Argv)
	b, _ := os.ReadFile(filepath.Join(l.Dir, "eval.py"))
	s.evals = append(s.evals, string(b))
	return problems.ExecLauncher{}.Launch(ctx, l)
}

// TestKernelBotProblem_OurJudge: a KernelBot-format problem runs under
// our judge by default: our eval.py in place of its own, every phase in
// one process, the report saying the judge timed it, and no secret-seed
// twin. A submission that hooks the checker's comparison and the
// problem's generate_input changes only its own process, and fails; the
// problem's own harness, opted into, is fooled by it, and its report
// says the problem's harness timed it.
func TestKernelBotProblem_OurJudge(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "kernelbot", "identity_py")
	rep, spy := evalSpy(t, dir, problems.ModeLeaderboard, filepath.Join(dir, "submission.py"))
	if !rep.Passed || rep.Score == nil {
		t.Fatalf("leaderboard run: Passed %v, Score %v, Reason %q", rep.Passed, rep.Score, rep.Reason)
	}
	if rep.TimedBy != problems.TimedByJudge {
		t.Errorf("TimedBy = %q, want %q", rep.TimedBy, problems.TimedByJudge)
	}
	if len(spy.argvs) != 1 || len(rep.Phases) != 3 {
		t.Fatalf("%d launches (%q) for %d phases; want one process for test, benchmark and leaderboard", len(spy.argvs), spy.argvs, len(rep.Phases))
	}
	if want := []string{"eval.py", "test", "test.cases.txt", "benchmark"}; strings.Join(spy.argvs[0][1:5], " ") != strings.Join(want, " ") {
		t.Errorf("argv = %q, want our harness's phases %q...", spy.argvs[0], want)
	}
	if !strings.Contains(spy.evals[0], "kernelbox evaluation harness") {
		t.Errorf("the run's eval.py is not ours:\n%.300s", spy.evals[0])
	}
	if extra := rep.Phases[0].Result.Extra; extra["judge-start"] == "" {
		t.Errorf("no judge-start among the extras %v: the judge did not run", extra)
	}
	task, err := problems.LoadTask(dir)
	if err != nil {
		t.Fatal(err)
	}
	if task.NeedsTwin() {
		t.Error("NeedsTwin() = true; our judge draws every ranked seed itself")
	}

	hooks := filepath.Join(dir, "hooks.py")
	rep, _ = evalSpy(t, dir, problems.ModeTest, hooks)
	if rep.Passed || !strings.Contains(rep.Reason, "output differs from the input") {
		t.Errorf("hooking cheat under our judge: Passed %v, Reason %q; want the problem's own message", rep.Passed, rep.Reason)
	}

	own := kernelbotCopy(t, "identity_py", "harness: own\n")
	rep, spy = evalSpy(t, own, problems.ModeTest, hooks)
	if rep.TimedBy != problems.TimedByProblem || len(spy.argvs) != 1 || strings.Contains(spy.evals[0], "kernelbox evaluation harness") {
		t.Errorf("harness: own: TimedBy %q, %d launches, eval.py ours %v; want the problem's own eval.py, labelled",
			rep.TimedBy, len(spy.argvs), strings.Contains(spy.evals[0], "kernelbox evaluation harness"))
	}
	// Why the label: the problem's own harness checks in the cheat's process.
	if !rep.Passed {
		t.Logf("the problem's own harness was not fooled this time: %s", rep.Reason)
	}
}

// TestKernelBotProblem_OwnHarnessLabelled: the opt-in runs the problem's
// own eval.py, one process a phase, needs the secret-seed twin, and says
// who timed it.
func TestKernelBotProblem_OwnHarnessLabelled(t *testing.T) {
	t.Parallel()
	dir := kernelbotCopy(t, "identity_py", "harness: own\n")
	rep, spy := evalSpy(t, dir, problems.ModeLeaderboard, filepath.Join(dir, "submission.py"))
	if !rep.Passed || rep.Score == nil || rep.TimedBy != problems.TimedByProblem {
		t.Fatalf("own harness leaderboard: Passed %v, Score %v, TimedBy %q, Reason %q; want passed and %q",
			rep.Passed, rep.Score, rep.TimedBy, rep.Reason, problems.TimedByProblem)
	}
	if len(spy.argvs) != 3 {
		t.Errorf("%d launches, want one a phase (KernelBot's contract)", len(spy.argvs))
	}
	task, err := problems.LoadTask(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !task.NeedsTwin() || task.TimedBy() != problems.TimedByProblem {
		t.Errorf("NeedsTwin() = %v, TimedBy() = %q; want the twin, timed by the problem", task.NeedsTwin(), task.TimedBy())
	}
}

// TestKernelBotProblem_Shapes: what KernelBot's problems hand around
// reaches our judge: list-valued cases (as tuples, as KernelBot's harness
// gives them), a harness and utils from two levels up, and an output
// buffer among the inputs that the submission writes into; a submission
// that hands that buffer back unwritten is not handed the answer by the
// judge's own check of an earlier call.
func TestKernelBotProblem_Shapes(t *testing.T) {
	t.Parallel()
	kb := filepath.Join("testdata", "kernelbot")
	for _, tt := range []struct {
		dir, submission string
		mode            problems.Mode
		pass            bool
		reason          string
	}{
		{dir: "grouped/ident_list", submission: "submission.py", mode: problems.ModeLeaderboard, pass: true},
		{dir: "linalg/ident_py", submission: "submission.py", mode: problems.ModeLeaderboard, pass: true},
		{dir: "outbuf_py", submission: "submission.py", mode: problems.ModeLeaderboard, pass: true},
		{dir: "outbuf_py", submission: "replay.py", mode: problems.ModeBenchmark, reason: "timed iteration"},
	} {
		t.Run(tt.dir+"/"+tt.submission, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(kb, filepath.FromSlash(tt.dir))
			rep, spy := evalSpy(t, dir, tt.mode, filepath.Join(dir, tt.submission))
			if rep.Passed != tt.pass || !strings.Contains(rep.Reason, tt.reason) || rep.TimedBy != problems.TimedByJudge {
				t.Errorf("Passed %v, Reason %q, TimedBy %q; want %v, a reason containing %q, the judge", rep.Passed, rep.Reason, rep.TimedBy, tt.pass, tt.reason)
			}
			if len(spy.argvs) != 1 {
				t.Errorf("%d launches, want one", len(spy.argvs))
			}
		})
	}
}

// TestKernelBotProblem_UnsupportedInput: an input our judge cannot hand
// to the worker is the problem's failure (exit 115, a harness error),
// naming what it holds, never a wrong answer charged to the contestant.
func TestKernelBotProblem_UnsupportedInput(t *testing.T) {
	t.Parallel()
	dir := kernelbotCopy(t, "identity_py", "")
	ref := filepath.Join(dir, "reference.py")
	testutil.EditFile(t, ref, "    return torch.randn(size, device=DEVICE)", "    return torch.randn(size, device=DEVICE), object()")
	rep, _ := evalSpy(t, dir, problems.ModeTest, filepath.Join(dir, "submission.py"))
	if rep.Passed || rep.Phases[0].ExitCode != problems.ExitHarness || !strings.Contains(rep.Reason, "holds a object") {
		t.Errorf("Passed %v, exit %d, Reason %q; want exit %d naming the object", rep.Passed, rep.Phases[0].ExitCode, rep.Reason, problems.ExitHarness)
	}
}
