package appliance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/problems"
	"kernelbox/queue"
)

var _ gpuMonitor = (*gpu.Monitor)(nil)

// cpuSlots are the CPU backend's slots. With at least as many CPUs as
// slots, each slot gets its own share of the CPUs (ids, as the daemon may
// use them): two runs at once would otherwise each start a thread per core
// and time each other.
func cpuSlots(n int, cpus []int) []Slot {
	var out []Slot
	per := len(cpus) / max(n, 1)
	for i := range n {
		s := Slot{ID: fmt.Sprintf("cpu:%d", i), GPUType: "cpu", Device: "cpu"}
		if per >= 1 {
			var ids []string
			for _, c := range cpus[i*per : (i+1)*per] {
				ids = append(ids, strconv.Itoa(c))
			}
			s.Cpuset = strings.Join(ids, ",")
		}
		out = append(out, s)
	}
	return out
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		ids := make([]int, goruntime.NumCPU())
		for i := range ids {
			ids[i] = i
		}
		return ids
	}
	var ids []int
	for c := 0; len(ids) < set.Count() && c < 8192; c++ {
		if set.IsSet(c) {
			ids = append(ids, c)
		}
	}
	return ids
}

// board is the running runner's slots as the service sees them: the
// box's inventory with each slot's state, and drains.
type board struct {
	r   *runner
	inv api.GPUsStatus // without Slots
}

func (b board) Status() api.GPUsStatus {
	st := b.inv
	st.Slots = b.r.states()
	return st
}

func (b board) Drain(id, why string) error { return b.r.drain(id, why) }
func (b board) Undrain(id string) error    { return b.r.undrain(id) }

var _ slotBoard = board{}

// newRunner builds a runner over the service's store and queue (one
// database), its task loader, reconciler and wake-up, for the slots with
// the launcher and interpreter given. The GPU monitor, the profiler and
// the driver's name are the daemon's to add.
func newRunner(cfg Config, svc *Service, slots []Slot, launch launcherFunc, it *problems.Interpreter, log *slog.Logger) *runner {
	return &runner{queue: svc.queue, store: svc.store, wake: svc.wake, tasks: svc.runTask, reconcile: svc.reconcile,
		cfg: runnerConfig{Boot: svc.boot, LeaseTTL: cfg.LeaseTTL, MaxRunningPerUser: cfg.MaxRunningPerUser,
			BackfillLimit: cfg.BackfillLimit, AgePerSecond: cfg.AgePerSecond, Version: cfg.Version, WarmStart: cfg.WarmStart,
			Standby: cfg.Standby, ProfilesDir: profilesDir(cfg.DataDir), Sandbox: cfg.Sandbox},
		slots: slots, launch: launch, python: it, workRoot: filepath.Join(cfg.DataDir, "work"), log: log,
		measure: cfg.Measurement, maxReport: int64(cfg.Profiler.MaxReport),
		caches: newUserCaches(filepath.Join(cfg.DataDir, "cache"), int64(cfg.CacheBudget)), metrics: svc.metrics}
}

// runnerConfig is the runner's part of the daemon's configuration.
type runnerConfig struct {
	Boot                             string // this daemon's boot id: leases of other boots are orphans
	LeaseTTL                         time.Duration
	MaxRunningPerUser, BackfillLimit int
	AgePerSecond                     int64
	// WarmStart claims the next job of a busy GPU and starts its sandbox
	// before the GPU is free (warm.go).
	WarmStart bool
	// Standby keeps a harness waiting on each idle GPU (standby.go).
	Standby     bool
	Version     string // the binary's, stored with every run
	ProfilesDir string // where kept .ncu-rep files go
	// Sandbox says whether this machine's runs go into the sandbox: their
	// isolation, stored with each (isolation.go).
	Sandbox bool
	// UnrankUnsandboxed keeps out of the rankings a run that went without
	// the sandbox: a coordinator's, unless slurm.rank_unsandboxed.
	UnrankUnsandboxed bool
}

// launcherFunc gives the launcher and base environment for one run on a
// gang: the sandbox with its device nodes, in the daemon.
type launcherFunc func(g gang, mode problems.Mode) (problems.Launcher, []string)

// runner takes jobs off the queue, one dispatcher per GPU type, and runs
// each on a gang of that type's free slots.
type runner struct {
	queue   jobQueue
	store   runStore
	metrics *metrics
	// wake is fired when jobs are enqueued; the runner fires it when GPUs
	// come free.
	wake *broadcast
	// tasks loads a leaderboard's problem; reconcile ends the runs whose
	// job the queue gave up on.
	tasks     func(*store.Leaderboard) (*problems.Task, error)
	reconcile func(context.Context) error
	cfg       runnerConfig
	slots     []Slot
	launch    launcherFunc
	python    *problems.Interpreter
	workRoot  string
	log       *slog.Logger
	// monitor, when set, gates, samples and judges runs on GPU slots.
	monitor gpuMonitor
	measure MeasureConfig
	driver  string
	// profiler, when set, runs profile mode on GPU slots under ncu; the
	// reports it keeps are at most maxReport bytes.
	profiler  *problems.Profiler
	maxReport int64
	// caches are the users' compile caches (cache.go); nil for none.
	caches *userCaches
	// idlePoll bounds how long an idle slot sleeps without a wake-up: a
	// retried job becomes ready after its delay, and nobody fires for that.
	idlePoll time.Duration

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
	onJobDone  func()       // tests and the idle-gap benchmark listen here
	// exec carries the runs out: nil for this box's own slots (local), a
	// Slurm cluster's nodes with the slurm executor (slurm.go).
	exec executor
	// canary holds each GPU type's canary (canary.go); nil for none.
	canary *canaries
	// events, when set, takes a run's progress events instead of the store:
	// on a Slurm node, which has none, they go to the coordinator.
	events func(ctx context.Context, subID int64, p api.Payload) error
}

// Start registers the slots with the service and starts one dispatcher per
// GPU type and the lease reaper. Stop ends them.
func (r *runner) Start(ctx context.Context) error {
	r.soft, r.cancelSoft = context.WithCancel(context.WithoutCancel(ctx))
	r.hard, r.cancelHard = context.WithCancel(context.WithoutCancel(ctx))
	if r.idlePoll == 0 {
		r.idlePoll = time.Second
	}
	if err := os.MkdirAll(r.workRoot, 0o700); err != nil {
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
		if r.exec == nil { // a Slurm node's runs are the node's to check
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

// states reports each slot and what it is doing, as `kernelbox gpus`
// shows it.
func (r *runner) states() []api.SlotState {
	out := []api.SlotState{}
	remote, _ := r.exec.(interface{ remote(slot string) string }) // where an executor sends runs away
	for _, s := range r.slots {
		st := api.SlotState{ID: s.ID, GPUType: s.GPUType, Device: s.Device, Cpuset: s.Cpuset, Clocks: s.Clocks,
			GPU: wireGPU(s.GPU), State: "idle"}
		if why, ok := r.drained.Load(s.ID); ok {
			st.State, st.Drained = "drained", why.(string)
		}
		if j, ok := r.busy.Load(s.ID); ok {
			st.State, st.Job = "running", j.(int64)
			if st.Job == canaryJob {
				st.State = "canary"
			}
		}
		if remote != nil {
			st.Remote = remote.remote(s.ID)
		}
		if r.measured(s) {
			if t, err := r.monitor.Read(s.GPU.UUID); err == nil {
				st.Now = &api.Telemetry{At: t.At, TempC: t.TempC, SMClockMHz: t.SMClockMHz, PowerMW: t.PowerMW,
					Reasons: t.Reasons, MemUsed: t.MemUsed, Processes: t.Processes}
			}
		}
		out = append(out, st)
	}
	return out
}

// wireGPU is what the API shows of a GPU: not its device nodes or /proc
// directory, which are the sandbox's business.
func wireGPU(g *gpu.GPU) *api.GPU {
	if g == nil {
		return nil
	}
	return &api.GPU{Index: g.Index, UUID: g.UUID, Name: g.Name, Type: g.Type, Vendor: string(g.Vendor), Memory: g.Memory,
		PCI: g.PCI, NUMANode: g.NUMANode, CPUs: g.CPUs, Parent: g.Parent, Links: g.Links}
}

// measured says whether the slot's runs are gated, sampled and checked.
// A MIG instance is not: its clocks, heat and power are its parent's,
// shared with its siblings' runs, and NVML answers them for the parent.
func (r *runner) measured(s Slot) bool {
	return s.GPU != nil && s.GPU.Parent == "" && r.monitor != nil
}

// checkHealth looks at a GPU after a job: every process of the run gone and
// its memory back at the idle baseline, within a short wait, and no
// hardware trouble (Xid, ECC, row remapping; gpu.Monitor.Health). A GPU that
// does not come back is drained: the jobs of its type go to the others,
// and an operator looks (`kernelbox gpus`, `kernelbox admin gpu undrain`).
func (r *runner) checkHealth(log *slog.Logger, slot Slot, job int64) {
	if problems := r.healthProblems(log, slot); len(problems) > 0 {
		why := fmt.Sprintf("unhealthy after job %d: %s", job, strings.Join(problems, "; "))
		r.drained.Store(slot.ID, why)
		log.Error("GPU drained", "why", why)
		if err := r.store.SetDrain(context.WithoutCancel(r.hard), slot.ID, why); err != nil {
			log.Error("record the drain: a restart would put the GPU back in service", "err", err)
		}
	}
}

// healthProblems are what is wrong with a measured slot's GPU after a
// job, after a wait for the run's processes and memory to go.
func (r *runner) healthProblems(log *slog.Logger, slot Slot) []string {
	if !r.measured(slot) || r.hard.Err() != nil {
		return nil
	}
	cfg := r.measure.gateConfig()
	cfg.MaxTempC, cfg.ThrottleMask, cfg.Wait = 0, 0, r.measure.HealthWait
	var problems []string
	if _, err := r.monitor.Gate(r.hard, slot.GPU.UUID, cfg); err != nil && r.hard.Err() == nil {
		problems = append(problems, err.Error())
	}
	if hw, err := r.monitor.Health(slot.GPU.UUID); err != nil {
		log.Warn("GPU health", "err", err)
	} else {
		problems = append(problems, hw...)
	}
	return problems
}

// restoreDrains takes the slots drained before the last stop out of
// service again; a recorded slot this box no longer has is only logged.
func (r *runner) restoreDrains(ctx context.Context) error {
	drains, err := r.store.Drains(ctx)
	if err != nil {
		return err
	}
	for id, why := range drains {
		if r.hasSlot(id) != nil {
			r.log.Warn("a drained GPU is not on this box now", logSlot, id, "why", why)
			continue
		}
		r.drained.Store(id, why)
		r.log.Warn("GPU still drained (kernelbox admin gpu undrain puts it back)", logSlot, id, "why", why)
	}
	return nil
}

// drain stops a slot from taking jobs; undrain lets it again. Both are
// recorded first, so a restart keeps what the operator decided.
func (r *runner) drain(id, why string) error {
	if err := r.hasSlot(id); err != nil {
		return err
	}
	if why == "" {
		why = "drained by an operator"
	}
	if err := r.store.SetDrain(r.hard, id, why); err != nil {
		return err
	}
	r.drained.Store(id, why)
	r.log.Warn("GPU drained", logSlot, id, "why", why)
	return nil
}

func (r *runner) undrain(id string) error {
	if err := r.hasSlot(id); err != nil {
		return err
	}
	if err := r.store.SetDrain(r.hard, id, ""); err != nil {
		return err
	}
	r.drained.Delete(id)
	r.log.Info("GPU undrained", logSlot, id)
	r.wake.Fire()
	return nil
}

func (r *runner) hasSlot(id string) error {
	for _, s := range r.slots {
		if s.ID == id {
			return nil
		}
	}
	return api.Errorf(api.CodeNotFound, "no slot %s (`kernelbox gpus` lists them)", id)
}

// Stop stops claiming, lets running jobs finish for up to grace, then
// stops them and gives their jobs back to the queue. It is idempotent.
func (r *runner) Stop(grace time.Duration) {
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
func (r *runner) dispatch(slots []Slot) {
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
		if r.exec == nil && usable == 0 {
			r.canary.unusable(slots[0].GPUType)
		} else if r.exec == nil {
			if s, ok := r.canary.take(slots[0].GPUType, free); ok {
				r.busy.Store(s.ID, canaryJob)
				r.startCanary(log, s, usable)
				continue
			}
		}
		err := queue.ErrNoJob
		if r.exec == nil && r.canary.holds(slots[0].GPUType, usable) {
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
				g := pickGang(free, l.GPUs)
				for _, s := range g {
					r.busy.Store(s.ID, l.ID)
				}
				r.wg.Add(1)
				go func() {
					defer r.wg.Done()
					log := r.log.With(logSlot, g.ids())
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
		t := time.NewTimer(r.idlePoll)
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
func (r *runner) release(log *slog.Logger, g gang, l *queue.Lease) {
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
func (r *runner) reapLoop() {
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
