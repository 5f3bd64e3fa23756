package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/problems"
	"kernelbox/queue"
)

// Runner takes jobs off the queue, one dispatcher per GPU type, and runs
// each on a gang of that type's free slots.
type Runner struct {
	queue   Queue
	store   Store
	metrics Metrics
	// wake is fired when jobs are enqueued; the runner fires it when GPUs
	// come free.
	wake      Wake
	tasks     func(*store.Leaderboard) (*problems.Task, error)
	reconcile func(context.Context) error
	events    func(ctx context.Context, subID int64, p api.Payload) error
	cfg       Config
	slots     []Slot
	launch    LaunchFunc
	python    *problems.Interpreter
	log       *slog.Logger
	monitor   Monitor
	profiler  *problems.Profiler
	// caches are the users' compile caches (cache.go).
	caches *userCaches
	// exec carries the runs out: the runner itself for this box's own
	// slots (local), a Slurm cluster's nodes with the slurm executor.
	exec   Executor
	remote bool // exec is not the runner: no canaries, standbys or warm starts
	canary *Canaries

	soft, hard context.Context // soft: stop claiming; hard: stop running
	cancelSoft context.CancelFunc
	cancelHard context.CancelFunc
	wg         sync.WaitGroup
	stopOnce   sync.Once
	busy       sync.Map     // slot id -> the job it runs (int64)
	drained    sync.Map     // slot id -> why it takes no jobs (string)
	warm       sync.Map     // slot id -> the job warming up for it (int64; warm.go)
	standbys   sync.Map     // slot id -> its standby harness (*standby; standby.go)
	standbyOff sync.Map     // slot id -> no standby before then (time.Time)
	handed     atomic.Int64 // runs handed to a standby
	onJobDone  func()
}

// New builds a runner from its parts. Its contexts exist from here on, so
// a runner that is never started (a Slurm node's one Execute) has them
// too; Stop ends them.
func New(d Deps) *Runner {
	r := &Runner{queue: d.Queue, store: d.Store, metrics: d.Metrics, wake: d.Wake, tasks: d.TasksFunc,
		reconcile: d.ReconcileFunc, events: d.EventsFunc, cfg: d.Config, slots: d.Slots, launch: d.Launch,
		python: d.Python, log: d.Log, monitor: d.Monitor, profiler: d.Profiler, canary: d.Canaries,
		caches: newUserCaches(d.Config.CacheDir, d.Config.CacheBudget), onJobDone: d.JobDoneFunc}
	r.exec, r.remote = d.Executor, d.Executor != nil
	if !r.remote {
		r.exec = r
	}
	if r.wake == nil {
		r.wake = nopWake{}
	}
	if r.metrics == nil {
		r.metrics = nopMetrics{}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.cfg.IdlePoll == 0 {
		r.cfg.IdlePoll = time.Second
	}
	r.soft, r.cancelSoft = context.WithCancel(context.Background())
	r.hard, r.cancelHard = context.WithCancel(context.Background())
	return r
}

// Start takes the slots drained before the last stop out of service again,
// and starts one dispatcher per GPU type and the lease reaper. Stop ends
// them.
func (r *Runner) Start(ctx context.Context) error {
	if err := os.MkdirAll(r.cfg.WorkRoot, 0o700); err != nil {
		return fmt.Errorf("start runner: %w", err)
	}
	if err := r.restoreDrains(ctx); err != nil {
		return fmt.Errorf("start runner: %w", err)
	}
	var types []string
	byType := map[string][]Slot{}
	for _, s := range r.slots {
		if _, ok := byType[s.GPUType]; !ok {
			types = append(types, s.GPUType)
		}
		byType[s.GPUType] = append(byType[s.GPUType], s)
	}
	for _, t := range types {
		if !r.remote { // a Slurm node's runs are the node's to check
			r.canary.expect(t)
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.dispatch(byType[t])
		}()
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.reapLoop()
	}()
	return nil
}

// Stop stops claiming, lets running jobs finish for up to grace, then
// stops them and gives their jobs back to the queue. It is idempotent.
func (r *Runner) Stop(grace time.Duration) {
	r.stopOnce.Do(func() {
		r.cancelSoft()
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			r.log.Warn("grace period over: stopping the running jobs; they go back to the queue", "grace", grace)
			r.cancelHard()
			<-done
		}
		r.cancelHard()
	})
}

// dispatch hands the jobs of one GPU type to its slots (all of that
// type): whenever some are free it claims a job that fits in them (the
// queue's gang allocation decides which) and runs it on a gang of them in
// a goroutine of its own, until Stop.
func (r *Runner) dispatch(slots []Slot) {
	log := r.log.With("gpu", slots[0].GPUType)
	req := queue.ClaimRequest{GPUType: slots[0].GPUType, Boot: r.cfg.Boot, TTL: r.cfg.LeaseTTL,
		AgePerSecond: r.cfg.AgePerSecond, MaxRunningPerUser: r.cfg.MaxRunningPerUser,
		BackfillLimit: r.cfg.BackfillLimit}
	for r.soft.Err() == nil {
		// Take the wake-up channel before claiming, so an enqueue (or a job
		// ending) between an empty claim and the wait is not missed.
		wake := r.wake.Wait()
		var free []Slot
		usable := 0
		for _, s := range slots {
			if _, drained := r.drained.Load(s.ID); drained {
				continue
			}
			usable++
			_, busy := r.busy.Load(s.ID)
			_, warming := r.warm.Load(s.ID) // a warm job takes it when it frees
			if !busy && !warming {
				free = append(free, s)
			}
		}
		if !r.remote && usable == 0 {
			r.canary.unusable(slots[0].GPUType)
		} else if !r.remote {
			if s, ok := r.canary.take(slots[0].GPUType, free); ok {
				r.busy.Store(s.ID, canaryJob)
				r.startCanary(log, s, usable)
				continue
			}
		}
		err := queue.ErrNoJob
		if !r.remote && r.canary.holds(slots[0].GPUType, usable) {
			// The type's last canary failed, or its first has not ended: a
			// run now would likely fail the same way and spend one of its
			// attempts. Its jobs wait in the queue until a canary passes.
		} else if s, ok := r.warmSlot(slots); ok && len(free) == 0 {
			if err = r.claimWarm(req, s, usable); err == nil {
				continue
			}
		} else if len(free) > 0 {
			req.Free, req.Capacity = len(free), usable
			var l *queue.Lease
			if l, err = r.queue.Claim(r.soft, req); err == nil {
				g := PickGang(free, l.GPUs)
				for _, s := range g {
					r.busy.Store(s.ID, l.ID)
				}
				r.wg.Add(1)
				go func() {
					defer r.wg.Done()
					log := r.log.With(logSlot, g.IDs())
					r.handle(log, g, l, nil)
					r.release(log, g, l)
				}()
				continue
			}
		}
		if !errors.Is(err, queue.ErrNoJob) && r.soft.Err() == nil {
			log.Error("claim", "err", err)
		} else if err != nil {
			r.tendStandbys(log, slots)
		}
		t := time.NewTimer(r.cfg.IdlePoll)
		select {
		case <-wake:
		case <-t.C:
		case <-r.soft.Done():
		}
		t.Stop()
	}
}

// release frees a gang after its job. The slots stay busy through the
// health check, so they are free only once the next job may start on them.
func (r *Runner) release(log *slog.Logger, g Gang, l *queue.Lease) {
	for _, s := range g {
		r.checkHealth(log, s, l.ID)
	}
	for _, s := range g {
		r.busy.Delete(s.ID)
	}
	if r.onJobDone != nil {
		r.onJobDone()
	}
	r.wake.Fire() // GPUs are free: the dispatcher may claim again
}

// reapLoop requeues the jobs of expired leases and ends runs the queue gave
// up on, every half lease.
func (r *Runner) reapLoop() {
	t := time.NewTicker(r.cfg.LeaseTTL / 2)
	defer t.Stop()
	stale := false
	for {
		select {
		case <-r.soft.Done():
			return
		case <-t.C:
		}
		// Only a reap leaves a run open whose job is over (it spent its
		// last attempt); reconciling reads every open run, so it runs only
		// then, and again after it failed.
		if n, err := r.queue.Reap(r.soft, r.cfg.Boot); err != nil {
			r.log.Error("reap leases", "err", err)
		} else if n > 0 {
			r.log.Warn("requeued jobs whose lease expired", "jobs", n)
			r.wake.Fire()
			stale = true
		}
		if !stale {
			continue
		}
		stale = false
		if err := r.reconcile(r.soft); err != nil && r.soft.Err() == nil {
			stale = true
			r.log.Error("reconcile", "err", err)
		}
	}
}
