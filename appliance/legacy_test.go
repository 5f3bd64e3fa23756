package appliance

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/queue"
)

// TestDaemon_MergesTwoFileDataDir starts on a data directory written by
// the two-file daemon (testdata/legacy-two-file, see its README): the
// queue's file is merged into kernelbox.db with nothing lost, the runs it
// had queued run to the end, the users' tokens, results, event logs and
// ranking are still there, and neither a restart nor a merge interrupted
// before its rename copies anything twice.
func TestDaemon_MergesTwoFileDataDir(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	ctx := t.Context()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "legacy-two-file"))); err != nil {
		t.Fatal(err)
	}
	// The fixture was written in /tmp/legacy; the leaderboard keeps its
	// problem's absolute path, which moves with the directory.
	db, err := queue.OpenDB(ctx, filepath.Join(dir, "kernelbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE leaderboards SET problem_dir = replace(problem_dir, '/tmp/legacy', ?)`, dir); err != nil {
		t.Fatal(err)
	}
	db.Close()
	tokens := map[string]string{}
	b, err := os.ReadFile(filepath.Join(dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, token, _ := strings.Cut(line, " ")
		tokens[name] = token
	}

	td := startDaemon(t, dir, nil)
	for _, id := range []int64{3, 4} { // queued in the old queue file
		v, err := td.admin.Wait(ctx, id, nil)
		if err != nil || v.Status != api.StatusDone || !v.Passed {
			t.Fatalf("submission %d after the merge = %+v, %v; want done and passed", id, v, err)
		}
	}
	rk, err := td.admin.Ranking(ctx, "quick", "cpu")
	if err != nil || len(rk.Rankings) != 1 || len(rk.Rankings[0].Rows) != 2 {
		t.Fatalf("ranking after the merge = %+v, %v; want ann (from before) and bob", rk, err)
	}
	for name, token := range tokens {
		c, err := api.NewClient(td.server, token)
		if err != nil {
			t.Fatal(err)
		}
		if u, err := c.Me(ctx); err != nil || u.Name != name {
			t.Errorf("%s's old token: %+v, %v", name, u, err)
		}
	}
	page, err := td.admin.Events(ctx, 1, 0, 0)
	if err != nil || len(page.Events) < 5 || page.Events[0].Kind != api.EventSubmissionQueued || !page.Done {
		t.Errorf("submission 1's event log after the merge: %d events, %v", len(page.Events), err)
	}
	td.stop()
	if _, err := os.Stat(filepath.Join(dir, "queue.db")); !os.IsNotExist(err) {
		t.Errorf("queue.db is still there after the merge (%v)", err)
	}
	checkJobs := func(when string) {
		t.Helper()
		st, err := store.Open(ctx, filepath.Join(dir, "kernelbox.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for id := int64(1); id <= 7; id++ {
			j, err := st.Queue().Get(ctx, id)
			switch {
			case id == 7 && !errors.Is(err, queue.ErrNotFound):
				t.Errorf("%s: job 7 = %+v, %v; want the old file's 6 jobs and no more", when, j, err)
			case id < 7 && (err != nil || j.State != queue.Succeeded):
				t.Errorf("%s: job %d = %+v, %v; want it merged and succeeded", when, id, j, err)
			}
		}
		sub, err := st.Submission(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sub.Runs {
			if j, err := st.Queue().Get(ctx, r.JobID); err != nil || j.Key != runKey(r.ID) {
				t.Errorf("%s: run %d's job %d = %+v, %v; want its own, merged", when, r.ID, r.JobID, j, err)
			}
		}
	}
	checkJobs("after the merge")

	// A merge that committed but was cut off before its rename: the old
	// file is back, and must not be copied again.
	old, err := os.ReadFile(filepath.Join(dir, "queue.db.merged"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "queue.db"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	td2 := startDaemon(t, dir, nil)
	td2.stop()
	if _, err := os.Stat(filepath.Join(dir, "queue.db")); !os.IsNotExist(err) {
		t.Errorf("queue.db is back after a restart (%v)", err)
	}
	checkJobs("after a second start")
}
