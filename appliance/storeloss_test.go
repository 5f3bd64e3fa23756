package appliance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/queue"
)

// TestRunner_MissingRun: a job whose run the store has no row for (the
// database lost it) fails and is logged, never succeeds; the job of a
// deleted submission is cancelled.
func TestRunner_MissingRun(t *testing.T) {
	t.Parallel()
	b := newRunnerBundle(t)
	ctx := t.Context()
	lb, err := b.st.Leaderboard(ctx, "quick")
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := b.st.CreateSubmission(ctx, store.NewSubmission{Leaderboard: lb, User: b.user, FileName: "s.py", Code: []byte("x\n"),
		GPUType: "cpu", Mode: "test", Category: api.CategoryTest})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.DeleteSubmission(ctx, deleted.ID); err != nil {
		t.Fatal(err)
	}
	jobs, err := b.st.Queue().Enqueue(ctx,
		queue.NewJob{User: "ann", GPUType: "cpu", Payload: []byte(`{"run":4242,"submission":4241}`)},
		queue.NewJob{User: "ann", GPUType: "cpu", Payload: fmt.Appendf(nil, `{"run":%d,"submission":%d}`, deleted.Runs[0].ID, deleted.ID)})
	if err != nil {
		t.Fatal(err)
	}
	b.svc.wake.Fire()
	for i, want := range []queue.State{queue.Failed, queue.Cancelled} {
		var j *queue.Job
		waitFor(t, 20*time.Second, func() bool {
			j, err = b.st.Queue().Get(ctx, jobs[i])
			return err == nil && j.State != queue.Queued && j.State != queue.Leased && j.State != queue.Running
		})
		if j.State != want {
			t.Errorf("job %d: %s (%q); want %s", i, j.State, j.Error, want)
		}
	}
	if len(b.fake.Specs()) != 0 {
		t.Errorf("the sandbox ran %d specs; want none", len(b.fake.Specs()))
	}
}

// TestDaemon_StoreLoss: a daemon refuses to start on a database older than
// its data directory's record (an older backup restored) or made anew (the
// file deleted), naming what is missing; --accept-store-loss starts it,
// and no id handed out before is handed out again.
func TestDaemon_StoreLoss(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "kernelbox.db")
	td := startDaemon(t, dir, nil)
	td.loadQuick()
	submit := func(td *testDaemon) int64 {
		t.Helper()
		code, err := os.ReadFile(quickSolution("correct/double.py"))
		if err != nil {
			t.Fatal(err)
		}
		sub, err := td.admin.Submit(t.Context(), api.SubmitRequest{Leaderboard: "quick", GPU: "cpu", Mode: "test", Code: code})
		if err != nil {
			t.Fatal(err)
		}
		return sub.ID
	}
	submit(td)
	td.stop()
	backup := filepath.Join(t.TempDir(), "kernelbox.db")
	copyFile(t, db, backup)
	td = startDaemon(t, dir, nil)
	newest := submit(td)
	td.stop()

	start := func(accept bool) error {
		cfg := DefaultConfig()
		cfg.DataDir, cfg.Listen, cfg.CPUSlots, cfg.Library, cfg.GPUs = dir, "127.0.0.1:0", 1, false, "none"
		cfg.CgroupParent = testCgroupParent(t)
		cfg.AcceptStoreLoss = accept
		d := NewDaemon(cfg, testLogger(t))
		err := d.Start(t.Context())
		if err == nil {
			d.Stop(t.Context())
		}
		return err
	}
	for _, tt := range []struct {
		name, want string
		damage     func()
	}{
		{"an older backup", "older than what this box handed out", func() {
			removeDB(t, db)
			copyFile(t, backup, db)
		}},
		{"a deleted database", "made anew or replaced", func() { removeDB(t, db) }},
	} {
		tt.damage()
		err := start(false)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--accept-store-loss") {
			t.Errorf("%s: Start() = %v; want a refusal saying %q and how to go on", tt.name, err, tt.want)
		}
	}
	copyFile(t, backup, db)
	if err := start(true); err != nil {
		t.Fatalf("Start() with --accept-store-loss = %v", err)
	}
	td = startDaemon(t, dir, nil)
	if id := submit(td); id <= newest {
		t.Errorf("after the accepted loss a submission got id %d; ids up to %d were handed out before", id, newest)
	}
}

// copyFile copies a stopped daemon's database, with its WAL if it kept one.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(src + suffix)
		if suffix != "" && os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// removeDB removes a stopped daemon's database with its WAL files.
func removeDB(t *testing.T, db string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(db + suffix); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// TestRunner_DamagedCode: code whose stored bytes no longer hash to its
// name (a damaged page, a hand edit of the database) is never run or
// shown as the contestant's: its run fails at once as the box's fault.
func TestRunner_DamagedCode(t *testing.T) {
	t.Parallel()
	b := newRunnerBundle(t)
	ctx := t.Context()
	lb, err := b.st.Leaderboard(ctx, "quick")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.st.CreateSubmission(ctx, store.NewSubmission{Leaderboard: lb, User: b.user, FileName: "s.py", Code: code,
		GPUType: "cpu", Mode: "test", Category: api.CategoryTest})
	if err != nil {
		t.Fatal(err)
	}
	// Another connection to the same file, as an editor would have.
	db, err := queue.OpenDB(ctx, filepath.Join(b.svc.cfg.DataDir, "kernelbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `UPDATE code SET data = ? WHERE sha256 = ?`, []byte("import os\nos.system('x')\n"), sub.SHA256); err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.Code(ctx, sub.SHA256); !errors.Is(err, store.ErrDamaged) {
		t.Errorf("Code of a damaged row = %v, want ErrDamaged", err)
	}
	jobs, err := b.st.Queue().Enqueue(ctx, queue.NewJob{User: "ann", GPUType: "cpu",
		Payload: fmt.Appendf(nil, `{"run":%d,"submission":%d}`, sub.Runs[0].ID, sub.ID)})
	if err != nil {
		t.Fatal(err)
	}
	b.svc.wake.Fire()
	var j *queue.Job
	waitFor(t, 20*time.Second, func() bool {
		j, err = b.st.Queue().Get(ctx, jobs[0])
		return err == nil && j.State != queue.Queued && j.State != queue.Leased && j.State != queue.Running
	})
	if j.State != queue.Failed || j.Attempts != 1 {
		t.Errorf("job: %s after %d attempts (%q); want failed at the first", j.State, j.Attempts, j.Error)
	}
	got, err := b.st.Submission(ctx, sub.ID)
	if err != nil || got.Passed || len(got.Runs) != 1 || !strings.Contains(got.Runs[0].Reason, "damaged") {
		t.Errorf("submission = %+v, %v; want its run failed as damaged", got, err)
	}
	if len(b.fake.Specs()) != 0 {
		t.Errorf("the sandbox ran %d specs; want none", len(b.fake.Specs()))
	}
}
