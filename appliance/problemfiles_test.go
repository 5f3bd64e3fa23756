package appliance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/appliance/api"
)

// TestDaemon_ProblemFilesVerified: a problem's files are checked before
// each run against what was loaded, so an eval.py changed on disk fails
// runs as the box's fault instead of giving contestants its verdicts; a
// reload accepts the new files; a problem directory that is gone shows in
// health. The stored path is inside the data directory and relative to it.
func TestDaemon_ProblemFilesVerified(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	ctx := t.Context()
	lb, err := td.d.store.Leaderboard(ctx, "quick")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.IsAbs(lb.ProblemDir) || !strings.HasPrefix(lb.ProblemDir, "problems/uploads/") || len(lb.ProblemSHA) != 64 {
		t.Errorf("stored problem: dir %q, sha %q; want a path relative to the data directory and a fingerprint", lb.ProblemDir, lb.ProblemSHA)
	}
	dir := filepath.Join(td.dir, filepath.FromSlash(lb.ProblemDir))
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	run := func() *api.SubmissionView {
		t.Helper()
		sub, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quick", Mode: "test", Code: code})
		if err != nil {
			t.Fatal(err)
		}
		v, err := td.admin.Wait(ctx, sub.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := run(); !v.Passed {
		t.Fatalf("before any change: %+v", v)
	}

	evalPy := filepath.Join(dir, "eval.py")
	orig, err := os.ReadFile(evalPy)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(evalPy, append(orig, "\n# an edit after the load\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := run(); v.Passed || len(v.Runs) != 1 || !strings.Contains(v.Runs[0].Reason, "changed since they were loaded") {
		t.Errorf("after eval.py changed: passed %v, runs %+v; want the run refused as changed", v.Passed, v.Runs)
	}
	if _, errOut, code := td.cli(td.token, "admin", "problems", "load", filepath.Join("testdata", "quick"), "--replace"); code != 0 {
		t.Fatalf("reload: exit %d: %s", code, errOut)
	}
	if v := run(); !v.Passed {
		t.Errorf("after a reload: %+v", v)
	}

	lb, err = td.d.store.Leaderboard(ctx, "quick")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(td.dir, filepath.FromSlash(lb.ProblemDir))); err != nil {
		t.Fatal(err)
	}
	h, err := td.admin.Health(ctx)
	if err != nil || h.Status != "degraded" || !strings.Contains(strings.Join(h.Reasons, ";"), "leaderboard quick: its problem is missing") {
		t.Errorf("health with the problem directory gone = %+v, %v; want degraded, naming quick", h, err)
	}
}
