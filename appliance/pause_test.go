package appliance

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
)

// TestDaemon_PauseResume: a paused box takes submissions and starts none;
// resuming runs them, and leaves drained a slot drained for a reason of
// its own (issue 19: popcorn's admin stop/start).
func TestDaemon_PauseResume(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil) // two CPU slots
	td.loadQuick()
	annc, ann := td.user("ann")
	ctx := t.Context()
	if _, err := td.admin.Drain(ctx, "cpu:1", "fan broken"); err != nil {
		t.Fatal(err)
	}
	if _, err := td.admin.Drain(ctx, "cpu:0", "queue paused: by hand"); err == nil || !strings.Contains(err.Error(), "marks a pause") {
		t.Errorf("a drain posing as a pause = %v; want it refused", err)
	}
	if out, errOut, code := td.cli(td.token, "admin", "queue", "pause", "--reason", "driver update"); code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("admin queue pause = exit %d, %q %s", code, out, errOut)
	}
	out, errOut, code := td.cli(ann, "submit", quickSolution("correct/double.py"), "--no-wait", "--json")
	if code != 0 {
		t.Fatalf("submit while paused = exit %d: %s%s", code, out, errOut)
	}
	subs, err := annc.Submissions(ctx, "", false, 1)
	if err != nil || len(subs) != 1 {
		t.Fatalf("submissions: %v, %v", subs, err)
	}
	id := subs[0].ID
	time.Sleep(2 * time.Second) // a slot in service would have started it by now
	if s, err := annc.Submission(ctx, id, false); err != nil || s.Status != api.StatusQueued {
		t.Errorf("submission %d while paused = %+v, %v; want queued", id, s, err)
	}
	st, err := td.admin.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range st.Slots {
		if sl.State != "drained" {
			t.Errorf("slot %s while paused = %s (%s); want drained", sl.ID, sl.State, sl.Drained)
		}
	}
	if out, errOut, code := td.cli(td.token, "admin", "queue", "resume"); code != 0 || !strings.Contains(out, "resumed: 1 of 2 slots take jobs") {
		t.Fatalf("admin queue resume = exit %d, %q %s", code, out, errOut)
	}
	waitFor(t, time.Minute, func() bool {
		s, err := annc.Submission(ctx, id, false)
		return err == nil && s.Status == api.StatusDone
	})
	st, err = td.admin.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range st.Slots {
		if sl.ID == "cpu:1" && sl.Drained != "fan broken" {
			t.Errorf("slot cpu:1 after resume: drained %q; want its own drain kept", sl.Drained)
		}
	}

	// The organiser's counts of it all (popcorn's admin stats).
	out, errOut, code = td.cli(td.token, "admin", "stats", "--json")
	var stats api.Stats
	if err := json.Unmarshal([]byte(out), &stats); err != nil || code != 0 {
		t.Fatalf("admin stats = exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if stats.Submissions != 1 || stats.ActiveUsers != 1 || stats.ByStatus["done"] != 1 || stats.ByLeaderboard["quick"] != 1 || stats.GPUSeconds["cpu"] <= 0 {
		t.Errorf("admin stats = %+v; want the one done submission on quick, its CPU time", stats)
	}
	if out, _, code = td.cli(td.token, "admin", "stats"); code != 0 || !strings.Contains(out, "ever: 1 submissions from 1 of") {
		t.Errorf("admin stats = exit %d, %q", code, out)
	}
	if _, errOut, code = td.cli(ann, "admin", "stats"); code == 0 || !strings.Contains(errOut, "organiser or admin") {
		t.Errorf("admin stats as a contestant = exit %d, %s; want refused", code, errOut)
	}
}
