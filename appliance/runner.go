package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"kernelbox/appliance/api"

	"golang.org/x/sys/unix"

	"kernelbox/gpu"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/queue"
	"kernelbox/sandbox"
)

// Slot is one GPU, or one share of the CPU backend, that runs one job at a
// time.
type Slot struct {
	ID      string `json:"id"`  // "cpu:0", or a GPU's UUID
	GPUType string `json:"gpu"` // what leaderboards name: "cpu", "H200"
	Device  string `json:"device"`
	// Cpuset pins the slot's runs to these CPUs ("0-7"); empty for all.
	Cpuset string `json:"cpuset,omitempty"`
	// GPU is the slot's GPU; nil for a CPU slot.
	GPU *gpu.GPU `json:"gpu_info,omitempty"`
	// Mask are the other GPUs' /proc directories, hidden from its runs.
	Mask []string `json:"-"`
	// Clocks is the slot's clock profile, stored with every score:
	// "locked 1500-1500 MHz", or "default" and why.
	Clocks string `json:"clocks,omitempty"`
}

// gpuSlots makes one slot per GPU: its runs get its device nodes, the CPUs
// of its NUMA node that the daemon may use (all of them when that leaves
// none) and none of the other GPUs' /proc entries.
func gpuSlots(inv gpu.Inventory, allowed []int) []Slot {
	var out []Slot
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		s := Slot{ID: g.UUID, GPUType: g.Type, Device: "cuda", GPU: g}
		if near, err := gpu.ParseCPUList(g.CPUs); err == nil {
			var ids []string
			for _, c := range near {
				if slices.Contains(allowed, c) {
					ids = append(ids, strconv.Itoa(c))
				}
			}
			s.Cpuset = strings.Join(ids, ",")
		}
		for _, o := range inv.GPUs {
			// MIG siblings share their parent's directory, which is theirs too.
			if o.ProcDir != "" && o.ProcDir != g.ProcDir && !slices.Contains(s.Mask, o.ProcDir) {
				s.Mask = append(s.Mask, o.ProcDir)
			}
		}
		out = append(out, s)
	}
	return out
}

// A gang is the slots one job runs on: one, or a multi-GPU problem's
// world_size, all of one type; the first leads (its ceilings and clocks are
// the run's).
type gang []Slot

// ids names the gang's slots, as runs record them: "A" or "A+B".
func (g gang) ids() string {
	ids := make([]string, len(g))
	for i, s := range g {
		ids[i] = s.ID
	}
	return strings.Join(ids, "+")
}

// devices are the nodes a run in mode gets on the gang: its GPUs', and for
// profile mode the profiler's too (shared nodes once).
func (g gang) devices(mode problems.Mode) []sandbox.Device {
	var out []sandbox.Device
	seen := map[string]bool{}
	for _, s := range g {
		if s.GPU == nil {
			continue
		}
		nodes := s.GPU.Nodes
		if mode == problems.ModeProfile {
			nodes = append(append([]gpu.Node(nil), nodes...), s.GPU.ProfilingNodes...)
		}
		for _, n := range nodes {
			if !seen[n.Path] {
				seen[n.Path] = true
				out = append(out, sandbox.Device{Path: n.Path, Type: n.Type, Major: n.Major, Minor: n.Minor})
			}
		}
	}
	return out
}

// env is what the gang adds to a run's environment: each variable once,
// its distinct values joined by commas in the gang's order
// (CUDA_VISIBLE_DEVICES=GPU-a,GPU-b, CUDA_DEVICE_ORDER=PCI_BUS_ID).
func (g gang) env() []string {
	var keys []string
	vals := map[string][]string{}
	for _, s := range g {
		if s.GPU == nil {
			continue
		}
		for _, kv := range s.GPU.VisibleEnv {
			k, v, _ := strings.Cut(kv, "=")
			if _, ok := vals[k]; !ok {
				keys = append(keys, k)
			}
			if !slices.Contains(vals[k], v) {
				vals[k] = append(vals[k], v)
			}
		}
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + strings.Join(vals[k], ",")
	}
	return out
}

// mask are the /proc directories of the GPUs outside the gang.
func (g gang) mask() []string {
	var own, out []string
	for _, s := range g {
		if s.GPU != nil {
			own = append(own, s.GPU.ProcDir)
		}
	}
	for _, s := range g {
		for _, m := range s.Mask {
			if !slices.Contains(own, m) && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// cpuset is the union of the slots' CPUs; empty (all) when one has none.
func (g gang) cpuset() string {
	var parts []string
	for _, s := range g {
		if s.Cpuset == "" {
			return ""
		}
		parts = append(parts, s.Cpuset)
	}
	return strings.Join(parts, ",")
}

// pickGang chooses k of the free slots for one job: for k > 1 the set whose
// pairs share the most NVLink/xGMI links, then a NUMA node, so that a
// multi-GPU run talks over the interconnect and not across sockets. The
// free slots come in the box's order, which breaks ties.
func pickGang(free []Slot, k int) gang {
	if k <= 1 || k >= len(free) {
		return gang(free[:min(max(k, 1), len(free))])
	}
	affinity := func(a, b Slot) int {
		if a.GPU == nil || b.GPU == nil {
			return 0
		}
		score := 4 * a.GPU.Links[b.GPU.UUID]
		if a.GPU.NUMANode >= 0 && a.GPU.NUMANode == b.GPU.NUMANode {
			score++
		}
		return score
	}
	var best gang
	bestScore := -1
	for seed := range free {
		// Grow from each slot, adding the one closest to those taken.
		taken := gang{free[seed]}
		used := map[int]bool{seed: true}
		score := 0
		for len(taken) < k {
			pick, pickScore := -1, -1
			for i, s := range free {
				if used[i] {
					continue
				}
				sc := 0
				for _, t := range taken {
					sc += affinity(s, t)
				}
				if sc > pickScore {
					pick, pickScore = i, sc
				}
			}
			used[pick] = true
			taken = append(taken, free[pick])
			score += pickScore
		}
		if score > bestScore {
			best, bestScore = taken, score
		}
	}
	return best
}

// gpuMonitor is what the runner needs of gpu.Monitor.
type gpuMonitor interface {
	Read(uuid string) (gpu.Telemetry, error)
	Health(uuid string) ([]string, error)
	Gate(ctx context.Context, uuid string, cfg gpu.GateConfig) (gpu.Telemetry, error)
	Sample(uuid string, every time.Duration, mask uint64) *gpu.Sampler
}

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

// launcherFunc gives the launcher and base environment for one run on a
// gang: the sandbox with its device nodes, in the daemon.
type launcherFunc func(g gang, mode problems.Mode) (problems.Launcher, []string)

// runner takes jobs off the queue, one dispatcher per GPU type, and runs
// each on a gang of that type's free slots.
type runner struct {
	svc      *Service
	slots    []Slot
	launch   launcherFunc
	python   *problems.Interpreter
	workRoot string
	log      *slog.Logger
	// monitor, when set, gates, samples and judges runs on GPU slots.
	monitor gpuMonitor
	measure MeasureConfig
	driver  string
	// profiler, when set, runs profile mode on GPU slots under ncu; the
	// reports it keeps are at most maxReport bytes.
	profiler  *problems.Profiler
	maxReport int64
	// idlePoll bounds how long an idle slot sleeps without a wake-up: a
	// retried job becomes ready after its delay, and nobody fires for that.
	idlePoll time.Duration

	soft, hard context.Context // soft: stop claiming; hard: stop running
	cancelSoft context.CancelFunc
	cancelHard context.CancelFunc
	wg         sync.WaitGroup
	stopOnce   sync.Once
	busy       sync.Map // slot id -> the job it runs (int64)
	drained    sync.Map // slot id -> why it takes no jobs (string)
	onJobDone  func()   // tests and the idle-gap benchmark listen here
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
	r.svc.mu.Lock()
	for _, s := range r.slots {
		r.svc.slots[s.GPUType]++
	}
	r.svc.mu.Unlock()
	var types []string
	byType := map[string][]Slot{}
	for _, s := range r.slots {
		if _, ok := byType[s.GPUType]; !ok {
			types = append(types, s.GPUType)
		}
		byType[s.GPUType] = append(byType[s.GPUType], s)
	}
	for _, t := range types {
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
	for _, s := range r.slots {
		st := api.SlotState{ID: s.ID, GPUType: s.GPUType, Device: s.Device, Cpuset: s.Cpuset, Clocks: s.Clocks,
			GPU: wireGPU(s.GPU), State: "idle"}
		if why, ok := r.drained.Load(s.ID); ok {
			st.State, st.Drained = "drained", why.(string)
		}
		if j, ok := r.busy.Load(s.ID); ok {
			st.State, st.Job = "running", j.(int64)
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
	if !r.measured(slot) || r.hard.Err() != nil {
		return
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
	if len(problems) > 0 {
		why := fmt.Sprintf("unhealthy after job %d: %s", job, strings.Join(problems, "; "))
		r.drained.Store(slot.ID, why)
		log.Error("GPU drained", "why", why)
	}
}

// drain stops a slot from taking jobs; undrain lets it again.
func (r *runner) drain(id, why string) error {
	if err := r.hasSlot(id); err != nil {
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
	r.drained.Delete(id)
	r.log.Info("GPU undrained", logSlot, id)
	r.svc.wake.Fire()
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
	req := queue.ClaimRequest{GPUType: slots[0].GPUType, Boot: r.svc.boot, TTL: r.svc.cfg.LeaseTTL,
		AgePerSecond: r.svc.cfg.AgePerSecond, MaxRunningPerUser: r.svc.cfg.MaxRunningPerUser,
		BackfillLimit: r.svc.cfg.BackfillLimit}
	for r.soft.Err() == nil {
		// Take the wake-up channel before claiming, so an enqueue (or a job
		// ending) between an empty claim and the wait is not missed.
		wake := r.svc.wake.Wait()
		var free []Slot
		usable := 0
		for _, s := range slots {
			if _, drained := r.drained.Load(s.ID); drained {
				continue
			}
			usable++
			if _, busy := r.busy.Load(s.ID); !busy {
				free = append(free, s)
			}
		}
		err := queue.ErrNoJob
		if len(free) > 0 {
			req.Free, req.Capacity = len(free), usable
			var l *queue.Lease
			if l, err = r.svc.queue.Claim(r.soft, req); err == nil {
				g := pickGang(free, l.GPUs)
				for _, s := range g {
					r.busy.Store(s.ID, l.ID)
				}
				r.wg.Add(1)
				go func() {
					defer r.wg.Done()
					r.run(g, l)
				}()
				continue
			}
		}
		if !errors.Is(err, queue.ErrNoJob) && r.soft.Err() == nil {
			log.Error("claim", "err", err)
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

// run runs one job on its gang. The slots stay busy through the health
// check, so they are free only once the next job may start on them.
func (r *runner) run(g gang, l *queue.Lease) {
	log := r.log.With(logSlot, g.ids())
	r.handle(log, g, l)
	for _, s := range g {
		r.checkHealth(log, s, l.ID)
	}
	for _, s := range g {
		r.busy.Delete(s.ID)
	}
	if r.onJobDone != nil {
		r.onJobDone()
	}
	r.svc.wake.Fire() // GPUs are free: the dispatcher may claim again
}

// reapLoop requeues the jobs of expired leases and ends runs the queue gave
// up on, every half lease.
func (r *runner) reapLoop() {
	t := time.NewTicker(r.svc.cfg.LeaseTTL / 2)
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
		if n, err := r.svc.queue.Reap(r.soft, r.svc.boot); err != nil {
			r.log.Error("reap leases", "err", err)
		} else if n > 0 {
			r.log.Warn("requeued jobs whose lease expired", "jobs", n)
			r.svc.wake.Fire()
			stale = true
		}
		if !stale {
			continue
		}
		stale = false
		if err := r.svc.reconcile(r.soft); err != nil && r.soft.Err() == nil {
			stale = true
			r.log.Error("reconcile", "err", err)
		}
	}
}

// handle runs one leased job to its end. The store's run row is written
// before the queue's job is finished; a crash between the two runs nothing
// twice, because the next holder finds the run ended (StartRun).
func (r *runner) handle(log *slog.Logger, g gang, l *queue.Lease) {
	slot := g[0]
	ctx := r.hard
	log = log.With(logJob, l.ID)
	var p jobPayload
	if err := json.Unmarshal(l.Payload, &p); err != nil || p.Run == 0 {
		log.Error("job without a run: failing it", "payload", string(l.Payload))
		r.finishJob(log, l, queue.Failed, 0, "bad payload")
		return
	}
	log = log.With(logRun, p.Run, logSubmission, p.Submission)
	started, err := r.svc.store.StartRun(ctx, p.Run, l.Token, g.ids())
	if err != nil {
		r.retry(log, l, p, err)
		return
	}
	if !started {
		// Ended already: cancelled, or stored before a crash.
		r.finishJob(log, l, queue.Succeeded, 0, "")
		return
	}
	if err := r.svc.queue.Start(ctx, l); err != nil {
		log.Warn("start job", "err", err)
		return
	}
	rc, err := r.svc.store.LoadRun(ctx, p.Run)
	if err != nil {
		r.retry(log, l, p, err)
		return
	}

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	var lost sync.Once
	leaseLost := make(chan struct{})
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		t := time.NewTicker(r.svc.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			if err := r.svc.queue.Heartbeat(runCtx, l, r.svc.cfg.LeaseTTL); errors.Is(err, queue.ErrLeaseLost) {
				log.Info("lease lost (cancelled or reaped): stopping the run")
				lost.Do(func() { close(leaseLost) })
				cancelRun()
				return
			} else if err != nil && runCtx.Err() == nil {
				log.Warn("heartbeat", "err", err)
			}
		}
	}()
	// A timed run on a GPU waits for the GPU to be fit for it; a GPU that
	// does not become so is the box's failure, retried later elsewhere or
	// again, never a verdict on the submission.
	timed := r.measured(slot) && problems.Mode(rc.Run.Mode) != problems.ModeTest
	var before *gpu.Telemetry
	if timed && r.measure.Gate {
		for i, s := range g {
			if !r.measured(s) {
				continue
			}
			tel, err := r.monitor.Gate(runCtx, s.GPU.UUID, r.measure.gateConfig())
			if err != nil {
				cancelRun()
				<-hbDone
				r.retry(log, l, p, fmt.Errorf("pre-flight gate of %s: %w", s.ID, err))
				return
			}
			if i == 0 {
				before = &tel
			}
		}
	}
	var samplers []*gpu.Sampler
	for _, s := range g {
		if r.measured(s) {
			samplers = append(samplers, r.monitor.Sample(s.GPU.UUID, r.measure.SampleEvery, r.measure.throttleMask()))
		}
	}
	begin := time.Now()
	rep, profile, evalErr := r.evaluate(runCtx, g, rc)
	wall := time.Since(begin)
	// The lead GPU's telemetry, the rest of a gang's, and the first that
	// throttled.
	var tel, throttled *gpu.RunTelemetry
	var others []gpu.RunTelemetry
	for i, sm := range samplers {
		rt := sm.Stop()
		if i == 0 {
			tel = &rt
		} else {
			others = append(others, rt)
		}
		if rt.Throttled && throttled == nil {
			throttled = &rt
		}
	}
	cancelRun()
	<-hbDone

	select {
	case <-leaseLost:
		return // whoever took the lease owns the job's state now
	default:
	}
	if evalErr != nil && r.hard.Err() != nil {
		// Shutting down: the job did nothing wrong, give it back whole.
		if err := r.svc.queue.Release(context.WithoutCancel(ctx), l, "daemon shut down during the run"); err != nil {
			log.Warn("release job", "err", err)
		}
		return
	}
	if evalErr != nil {
		r.retry(log, l, p, evalErr)
		return
	}
	if timed && throttled != nil {
		// The timings are not comparable: run it again, and never score this one.
		r.retry(log, l, p, fmt.Errorf("the GPU throttled during the run (clock-event reasons %#x, SM clock %d-%d MHz)",
			throttled.Reasons&r.measure.throttleMask(), throttled.SMClockMin, throttled.SMClockMax))
		return
	}
	res := RunResult{Status: api.StatusDone, Passed: rep.Passed, Reason: rep.Reason, Profile: profile}
	for _, f := range rep.Flags {
		res.Findings = append(res.Findings, policies.Finding{Rule: f.Rule, Verdict: policies.ScanFlag, Message: f.Message})
	}
	if tel != nil {
		res.Telemetry, _ = json.Marshal(struct {
			Gate *gpu.Telemetry `json:"gate,omitempty"`
			*gpu.RunTelemetry
			Others []gpu.RunTelemetry `json:"others,omitempty"` // a gang's other GPUs
		}{before, tel, others})
	}
	if rep.Passed && rc.Run.Mode == string(problems.ModeLeaderboard) {
		res.Score = rep.Score
	}
	res.Report, _ = json.Marshal(rep)
	info := map[string]any{"slot": g.ids(), "gpu": slot.GPUType, "device": slot.Device,
		"python": r.python.Path, "torch": r.python.Torch, "kernelbox": r.svc.cfg.Version, "wall_ns": wall}
	if slot.GPU != nil {
		info["gpu_uuid"], info["gpu_name"], info["driver"], info["clocks"] = slot.GPU.UUID, slot.GPU.Name, r.driver, slot.Clocks
	}
	if len(g) > 1 {
		info["gpus"] = len(g)
	}
	res.SystemInfo, _ = json.Marshal(info)
	if _, err := r.svc.store.FinishRun(context.WithoutCancel(ctx), p.Run, l.Token, res); err != nil {
		log.Warn("store run result", "err", err)
		return
	}
	log.Info("run finished", "passed", rep.Passed, "wall", wall.Round(time.Millisecond))
	r.finishJob(log, l, queue.Succeeded, wall, "")
}

func (r *runner) finishJob(log *slog.Logger, l *queue.Lease, st queue.State, gpuTime time.Duration, why string) {
	if err := r.svc.queue.Finish(context.WithoutCancel(r.hard), l, st, gpuTime, why); err != nil {
		log.Warn("finish job", "err", err)
	}
}

// retry hands an infrastructure failure back to the queue; with no
// attempts left the run ends as an error (the user's code may be fine).
func (r *runner) retry(log *slog.Logger, l *queue.Lease, p jobPayload, cause error) {
	ctx := context.WithoutCancel(r.hard)
	log.Error("run could not be carried out", "attempt", l.Attempts, "err", cause)
	again, err := r.svc.queue.Retry(ctx, l, time.Second, cause.Error())
	if err != nil {
		log.Warn("retry job", "err", err)
		return
	}
	if again {
		_ = r.svc.store.AppendEvent(ctx, p.Submission, api.RunRetried{Run: p.Run, Attempt: l.Attempts})
		return
	}
	res := RunResult{Status: runError, Reason: fmt.Sprintf("the box could not run it (%d attempts): %v", l.Attempts, cause)}
	if _, err := r.svc.store.FinishRun(ctx, p.Run, l.Token, res); err != nil {
		log.Warn("store failed run", "err", err)
	}
}

// evaluate runs the harness for one run in a fresh work directory.
func (r *runner) evaluate(ctx context.Context, g gang, rc *RunContext) (*problems.Report, string, error) {
	slot := g[0]
	t, err := r.svc.task(rc.Leaderboard)
	if err != nil {
		return nil, "", err
	}
	scratch, err := os.MkdirTemp(r.workRoot, fmt.Sprintf("run-%d-", rc.Run.ID))
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(scratch)
	work := filepath.Join(scratch, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return nil, "", err
	}
	mode := problems.Mode(rc.Run.Mode)
	launcher, env := r.launch(g, mode)
	var seed *int64
	if rc.Run.Secret {
		seed = &rc.Leaderboard.SecretSeed
	}
	subID := rc.Submission.ID
	var profiler *problems.Profiler
	if mode == problems.ModeProfile && slot.GPU != nil && r.profiler != nil {
		p := *r.profiler
		if strings.HasPrefix(slot.Clocks, "locked") {
			p.ClockControl = "none" // profile at the ranked runs' clocks, and leave the lock in place
		}
		profiler = &p
	}
	rep, err := problems.Evaluate(ctx, launcher, t, problems.EvalOptions{
		Profiler: profiler, Ceilings: r.measure.ceilings(slot), FloorSlack: r.measure.FloorSlack,
		Mode: mode, Python: r.python.Path, Device: slot.Device, Seed: seed, Env: env, WorkDir: work, GPUs: len(g),
		Submission: rc.Code, OutputLimit: 64 << 10,
		OnTest: func(phase string, tr problems.TestResult) {
			if rc.Run.Secret {
				return // its cases carry the secret seed
			}
			ev := api.RunTest{Run: rc.Run.ID, Phase: phase, Index: tr.Index, Spec: tr.Spec, Status: tr.Status}
			if err := r.svc.store.AppendEvent(ctx, subID, ev); err != nil {
				r.log.Warn("log test", logRun, rc.Run.ID, "err", err)
			}
		},
		OnPhase: func(ph problems.Phase) {
			ev := api.RunPhase{Run: rc.Run.ID, Secret: rc.Run.Secret, Phase: ph.Name, Passed: ph.Passed, Wall: ph.Wall}
			switch {
			case rc.Run.Secret && !ph.Passed:
				// A secret run's reason names the failing case and its seed.
				ev.Reason = "failed on the secret inputs"
			case !rc.Run.Secret:
				ev.Reason = ph.Reason
				if ph.Result != nil {
					ev.Tests, ev.Benchmarks = ph.Result.Tests, ph.Result.Benchmarks
				}
			}
			if err := r.svc.store.AppendEvent(ctx, subID, ev); err != nil {
				r.log.Warn("log phase", logRun, rc.Run.ID, "err", err)
			}
		},
	})
	if err != nil {
		return nil, "", err
	}
	// The work directory goes when this returns: keep the report first.
	name, err := r.keepProfile(rc.Run.ID, rep.Profile)
	return rep, name, err
}
