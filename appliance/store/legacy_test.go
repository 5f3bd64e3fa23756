package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/queue"
)

// TestMergeQueueFile_RefusesTwoQueues: an old queue file beside a store
// that holds jobs of its own is not merged: an operator decides.
func TestMergeQueueFile_RefusesTwoQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	old, err := queue.Open(ctx, filepath.Join(dir, "queue.db"), queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Enqueue(ctx, queue.NewJob{User: "ann", GPUType: "cpu"}); err != nil {
		t.Fatal(err)
	}
	old.Close()
	st, err := Open(ctx, filepath.Join(dir, "kernelbox.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Queue().Enqueue(ctx, queue.NewJob{User: "bob", GPUType: "cpu"}); err != nil {
		t.Fatal(err)
	}
	err = MergeQueueFile(ctx, st, filepath.Join(dir, "queue.db"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "holds 1 jobs already") {
		t.Errorf("mergeQueueFile beside a store with jobs = %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "queue.db")); err != nil {
		t.Errorf("the old queue file is gone after a refused merge: %v", err)
	}
}

// TestMergeQueueFile_Fixture merges the queue file of a data directory the
// two-file binary wrote (../testdata/legacy-two-file): every job arrives
// with its id, key and state, the old file is kept byte for byte (its
// binary can still open it), and a merge cut off before its rename copies
// nothing twice.
func TestMergeQueueFile_Fixture(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	fixture := filepath.Join("..", "testdata", "legacy-two-file")
	var oldQueue []byte
	for _, f := range []string{"kernelbox.db", "queue.db"} {
		b, err := os.ReadFile(filepath.Join(fixture, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "queue.db" {
			oldQueue = b
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := Open(ctx, filepath.Join(dir, "kernelbox.db"), nil)
	if err != nil {
		t.Fatalf("Open of the two-file era's kernelbox.db: %v", err)
	}
	defer st.Close()
	for round := range 2 {
		if err := MergeQueueFile(ctx, st, filepath.Join(dir, "queue.db"), log); err != nil {
			t.Fatalf("round %d: MergeQueueFile: %v", round, err)
		}
		for id := int64(1); id <= 7; id++ {
			j, err := st.Queue().Get(ctx, id)
			switch {
			case id == 7 && !errors.Is(err, queue.ErrNotFound):
				t.Errorf("round %d: job 7 = %+v, %v; want the old file's 6 jobs only", round, j, err)
			case id < 7 && (err != nil || j.Key != fmt.Sprintf("run:%d", id)):
				t.Errorf("round %d: job %d = %+v, %v; want it merged under run:%d", round, id, j, err, id)
			}
		}
		kept, err := os.ReadFile(filepath.Join(dir, "queue.db.merged"))
		if err != nil || !bytes.Equal(kept, oldQueue) {
			t.Errorf("round %d: queue.db.merged differs from the old file (%v)", round, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "queue.db")); !os.IsNotExist(err) {
			t.Errorf("round %d: queue.db is still there (%v)", round, err)
		}
		// The merge committed, then the process died before its rename.
		if err := os.WriteFile(filepath.Join(dir, "queue.db"), oldQueue, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int64{5, 6} { // queued when the old daemon stopped
		if j, err := st.Queue().Get(ctx, id); err != nil || j.State != queue.Queued {
			t.Errorf("job %d = %+v, %v; want it still queued", id, j, err)
		}
	}
}
