package runner

import (
	"context"
	"errors"
	"fmt"

	"kernelbox/queue"
)

// Warm starts (issue 17): while a GPU runs one job, the dispatcher claims
// the next one-GPU job for it and starts that job's sandbox at once. Its
// judge imports torch and starts its workers while the GPU is still busy,
// then waits at the sandbox's gate; the gate opens when the GPU is free,
// healthy, gated and sampled, and only then may the run touch it. The
// seconds of a cold start overlap the previous run instead of following
// it. CPU slots take no warm jobs: there the preparation would compete for
// the very cores the running job is timed on.

// errWarmStopped: the daemon stopped, or the slot was drained, while a
// warm job waited for it; the job goes back to the queue untouched.
var errWarmStopped = errors.New("the slot was never free for this job")

// warmSlot is a slot the dispatcher may claim a warm job for: busy, fit
// (not drained), a GPU, and with no job warming for it yet.
func (r *Runner) warmSlot(slots []Slot) (Slot, bool) {
	if !r.cfg.WarmStart {
		return Slot{}, false
	}
	for _, s := range slots {
		if s.GPU == nil {
			continue
		}
		if _, drained := r.drained.Load(s.ID); drained {
			continue
		}
		if _, warming := r.warm.Load(s.ID); warming {
			continue
		}
		if _, busy := r.busy.Load(s.ID); busy {
			return s, true
		}
	}
	return Slot{}, false
}

// claimWarm claims a one-GPU job to warm up for s, and runs it in a
// goroutine of the runner's; it returns the queue's error (ErrNoJob when
// none fits).
func (r *Runner) claimWarm(req queue.ClaimRequest, s Slot, usable int) error {
	req.Free, req.Capacity = 1, usable
	l, err := r.queue.Claim(r.soft, req)
	if err != nil {
		return err
	}
	r.warm.Store(s.ID, l.ID)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.runWarm(s, l)
	}()
	return nil
}

// runWarm runs a job claimed for a slot that was still busy: its run
// starts now and takes the slot at the gate. A job that never reached the
// gate leaves the slot as it found it.
func (r *Runner) runWarm(s Slot, l *queue.Lease) {
	log := r.log.With(logSlot, s.ID, "warm", true)
	took := false
	take := func(ctx context.Context) error {
		for {
			wake := r.wake.Wait()
			if _, drained := r.drained.Load(s.ID); drained {
				return fmt.Errorf("slot %s: %w (drained)", s.ID, errWarmStopped)
			}
			if _, busy := r.busy.Load(s.ID); !busy {
				// The dispatcher leaves a slot with a warm job alone, so
				// nobody can take it between the check and this store.
				r.busy.Store(s.ID, l.ID)
				r.warm.Delete(s.ID)
				took = true
				return nil
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return ctx.Err()
			case <-r.soft.Done():
				return fmt.Errorf("slot %s: %w (the daemon is stopping)", s.ID, errWarmStopped)
			}
		}
	}
	g := Gang{s}
	r.handle(log, g, l, take)
	if !took {
		r.warm.Delete(s.ID)
		r.wake.Fire() // the dispatcher may warm another job for it
		return
	}
	r.release(log, g, l)
}
