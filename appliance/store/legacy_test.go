package store

import (
	"context"
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
