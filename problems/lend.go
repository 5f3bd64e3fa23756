package problems

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Who timed a run (Report.TimedBy, Task.TimedBy).
const (
	// TimedByJudge: our judge, which never imports the submission.
	TimedByJudge = "judge"
	// TimedByProblem: the problem's own harness, in the submission's
	// process: less trusted, and a leaderboard says so (TimedByNote).
	TimedByProblem = "problem"
)

// TimedByNote is what a leaderboard or a result shows for a problem timed
// by its own harness.
const TimedByNote = "timed by the problem's harness (less trusted)"

// isJudgeFile says whether name is one of our harness's files, which are
// written over a KernelBot problem's run directory when our judge takes
// its place (HarnessKernelBot): every .py of the bundled library's
// harness directory, as writeJudge writes them.
func isJudgeFile(name string) bool {
	files, err := harnessScripts()
	if err != nil {
		return true // no bundled harness to lend: nothing may be overwritten
	}
	_, ok := files[name]
	return ok
}

// TimedBy says whose harness times the problem's runs: TimedByJudge, or
// TimedByProblem for the opt-in HarnessOwn and for the KernelBot problems
// our judge cannot take (yet), which keep their own harness rather than
// fail to load: lang cu (its harness is compiled with the submission),
// multi_gpu (our ranks need a reference that computes every rank's
// output, kbutils.make_checker), and a problem without the files our
// judge needs (reference.py, submission.py) or with one of its names.
func (t *Task) TimedBy() string {
	if t.ownHarnessWhy() != "" {
		return TimedByProblem
	}
	return TimedByJudge
}

// HarnessNote is what an organiser is told of a problem timed by its own
// harness (TimedByNote and why), or "" for one our judge times.
func (t *Task) HarnessNote() string {
	if why := t.ownHarnessWhy(); why != "" {
		return TimedByNote + ": " + why
	}
	return ""
}

// ownHarnessWhy says why the problem's own harness times it, or "".
func (t *Task) ownHarnessWhy() string {
	switch {
	case t.Harness == HarnessKernelbox:
		return ""
	case t.Harness == HarnessOwn:
		return "its task.yml says harness: own"
	case t.Lang != LangPython:
		return "a lang cu harness is compiled with the submission, which our judge cannot take apart"
	case t.MultiGPU:
		return "our judge takes a multi_gpu KernelBot problem's place only once its reference computes every rank's output"
	case !slices.ContainsFunc(t.Files, func(f File) bool { return f.Name == "reference.py" }):
		return "it has no reference.py, whose generate_input and check_implementation our judge would use"
	case t.SubmissionFile() != "submission.py":
		return fmt.Sprintf("its contestant's file is %q, and our judge imports submission.py", t.SubmissionFile())
	}
	for _, f := range t.Files {
		// Their eval.py is what ours replaces; any other file of our
		// judge's name would be overwritten.
		if f.Name != "eval.py" && isJudgeFile(f.Name) {
			return fmt.Sprintf("its file %s has the name of one of our judge's", f.Name)
		}
	}
	return ""
}

// lendsJudge says whether our judge takes the place of the problem's
// eval.py (a KernelBot-format problem it can judge).
func (t *Task) lendsJudge() bool {
	return t.Harness != HarnessKernelbox && t.TimedBy() == TimedByJudge
}

// onePhaseAProcess says whether the problem's harness runs one mode a
// process (KernelBot's contract), not every phase of a run in one.
func (t *Task) onePhaseAProcess() bool {
	return t.TimedBy() == TimedByProblem
}

// writeJudge writes our harness (the bundled library's harness directory)
// into dir, over what is there: a KernelBot problem's eval.py is replaced,
// its utils.py (which its reference imports) stays beside our kbutils.py.
// Written into the run directory itself, not beside it: the worker and
// the judge import each other's modules from the directory they start in,
// and a standby (standby.go) finds the same files there.
func writeJudge(dir string) error {
	files, err := harnessScripts()
	if err != nil {
		return fmt.Errorf("write judge: bundled harness: %w", err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write judge: %w", err)
		}
	}
	return nil
}
