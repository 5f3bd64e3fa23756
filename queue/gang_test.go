package queue

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func claimGang(t *testing.T, s *Store, free, capacity, backfill int) (*Lease, error) {
	t.Helper()
	return s.Claim(t.Context(), ClaimRequest{GPUType: "H200", Boot: "boot-a", TTL: time.Hour,
		Free: free, Capacity: capacity, BackfillLimit: backfill})
}

// TestStore_GangReservation: a gang job at the head of the queue lets at
// most BackfillLimit smaller jobs start ahead of it; then the free GPUs
// wait for it, and it starts once enough are free.
func TestStore_GangReservation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := mustEnqueue(t, b.s,
		NewJob{User: "ann", GPUType: "H200", GPUs: 2},
		NewJob{User: "bob", GPUType: "H200"},
		NewJob{User: "cat", GPUType: "H200"},
		NewJob{User: "dan", GPUType: "H200"})
	gang, first := ids[0], ids[1]

	l, err := claimGang(t, b.s, 1, 2, 1)
	if err != nil || l.ID != first || l.GPUs != 1 {
		t.Fatalf("claim with 1 of 2 free = %v, %v; want job %d backfilled", l, err, first)
	}
	if _, err := claimGang(t, b.s, 1, 2, 1); !errors.Is(err, ErrNoJob) {
		t.Fatalf("second claim with 1 free = %v; want ErrNoJob: the GPU is held for gang job %d", err, gang)
	}
	l, err = claimGang(t, b.s, 2, 2, 1)
	if err != nil || l.ID != gang || l.GPUs != 2 {
		t.Fatalf("claim with 2 free = %v, %v; want gang job %d with 2 GPUs", l, err, gang)
	}
	got, err := b.s.Get(t.Context(), gang)
	if err != nil || got.GPUs != 2 || got.State != Leased {
		t.Fatalf("Get(gang) = %+v, %v", got, err)
	}
}

// TestStore_GangTooBig: a job asking for more GPUs than the box can give
// (some drained) is passed by, not waited for.
func TestStore_GangTooBig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := mustEnqueue(t, b.s,
		NewJob{User: "ann", GPUType: "H200", GPUs: 4},
		NewJob{User: "bob", GPUType: "H200"},
		NewJob{User: "cat", GPUType: "H200"})
	for _, want := range ids[1:] {
		l, err := claimGang(t, b.s, 2, 2, 0)
		if err != nil || l.ID != want {
			t.Fatalf("claim = %v, %v; want job %d", l, err, want)
		}
	}
	if _, err := claimGang(t, b.s, 2, 2, 0); !errors.Is(err, ErrNoJob) {
		t.Fatalf("claim = %v; want ErrNoJob (the 4-GPU job cannot run on 2)", err)
	}
	if l, err := claimGang(t, b.s, 4, 4, 0); err != nil || l.ID != ids[0] {
		t.Fatalf("claim with 4 = %v, %v; want job %d", l, err, ids[0])
	}
}

// TestStore_GangMixedLoad drives the queue like a box of 4 GPUs under a
// stream of single-GPU jobs and gangs of 2 and 4: the GPUs are never
// over-committed, every job ends, and no gang waits behind more than the
// backfill limit of jobs that started while it headed the queue.
func TestStore_GangMixedLoad(t *testing.T) {
	t.Parallel()
	const (
		gpus     = 4
		backfill = 3
		jobs     = 200
	)
	b := setup(t)
	rng := rand.New(rand.NewPCG(7, 11))
	size := map[int64]int{}
	for i := range jobs {
		n := 1
		switch r := rng.IntN(10); {
		case r == 0:
			n = 4
		case r < 3:
			n = 2
		}
		id := mustEnqueue(t, b.s, NewJob{User: fmt.Sprintf("u%d", i%7), GPUType: "H200", GPUs: n})[0]
		size[id] = n
	}
	type running struct {
		l    *Lease
		ends int
	}
	var live []running
	used, done := 0, 0
	maxPassed := 0
	for step := 0; done < jobs; step++ {
		if step > 100*jobs {
			t.Fatalf("stuck: %d of %d jobs done, %d GPUs in use", done, jobs, used)
		}
		kept := live[:0]
		for _, r := range live {
			if r.ends > step {
				kept = append(kept, r)
				continue
			}
			if err := b.s.Finish(t.Context(), r.l, Succeeded, time.Second, ""); err != nil {
				t.Fatal(err)
			}
			used -= r.l.GPUs
			done++
		}
		live = kept
		for used < gpus {
			l, err := claimGang(t, b.s, gpus-used, gpus, backfill)
			if errors.Is(err, ErrNoJob) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.GPUs != size[l.ID] {
				t.Fatalf("job %d leased with %d GPUs, asked for %d", l.ID, l.GPUs, size[l.ID])
			}
			used += l.GPUs
			if used > gpus {
				t.Fatalf("step %d: %d GPUs in use of %d", step, used, gpus)
			}
			var passed int
			if err := b.s.db.QueryRow(`SELECT passed_over FROM jobs WHERE id = ?`, l.ID).Scan(&passed); err != nil {
				t.Fatal(err)
			}
			maxPassed = max(maxPassed, passed)
			live = append(live, running{l, step + 1 + rng.IntN(5)})
		}
	}
	if maxPassed > backfill {
		t.Errorf("a gang job was passed over %d times; the limit is %d", maxPassed, backfill)
	}
	t.Logf("%d jobs on %d GPUs; a gang was passed over at most %d times", jobs, gpus, maxPassed)
}
