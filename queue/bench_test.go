package queue

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkStore_JobCycle measures one job's whole queue cost (enqueue,
// claim, start, finish) with FULL synchronous commits on a real file: the
// queue's share of the idle gap between two jobs on one GPU slot is the
// claim, start and finish part of it.
func BenchmarkStore_JobCycle(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "queue.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Enqueue(ctx, NewJob{User: "u", GPUType: "cpu", Payload: []byte("{}")}); err != nil {
			b.Fatal(err)
		}
		l, err := s.Claim(ctx, ClaimRequest{GPUType: "cpu", Boot: "boot", TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(ctx, l); err != nil {
			b.Fatal(err)
		}
		if err := s.Finish(ctx, l, Succeeded, time.Millisecond, ""); err != nil {
			b.Fatal(err)
		}
	}
}
