package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/queue"
)

// Payload is what a queue job carries: the run it evaluates.
type Payload struct {
	Run        int64 `json:"run"`
	Submission int64 `json:"submission"`
}

// handle runs one leased job to its end, in steps: take the lease over
// the run, execute it under a heartbeat (gate, sample, evaluate), judge
// what came back, record the result. The store's run row is written
// before the queue's job is finished; a crash between the two runs nothing
// twice, because the next holder finds the run ended (StartRun).
//
// take, when set, is a warm job's wait for its slot (warm.go): the run
// starts before the gang is its own and takes it at the gate.
func (r *Runner) handle(log *slog.Logger, g Gang, l *queue.Lease, take func(context.Context) error) {
	log = log.With(logJob, l.ID)
	p, rc, ok := r.takeRun(log, g, l)
	if !ok {
		return
	}
	log = log.With(logRun, p.Run, logSubmission, p.Submission)
	defer r.HoldCache(log, rc)() // pruned after the run, outside its timed part
	hb := r.heartbeat(log, l)
	ex, err := r.exec.Execute(hb.ctx, g, rc, take)
	if hb.stop() {
		return // whoever took the lease owns the job's state now
	}
	switch {
	case err != nil && (r.hard.Err() != nil || errors.Is(err, errWarmStopped)):
		// Shutting down: the job did nothing wrong, give it back whole.
		if err := r.queue.Release(context.WithoutCancel(r.hard), l, "daemon shut down during the run"); err != nil {
			log.Warn("release job", "err", err)
		}
	case err != nil:
		r.metrics.Run(g[0].GPUType, rc.Run.Mode, "box_error", 0)
		r.retry(log, l, p, err)
	case ex.Timed && ex.Throttled != nil:
		// The timings are not comparable: run it again, and never score this one.
		r.metrics.Run(g[0].GPUType, rc.Run.Mode, "throttled", 0)
		r.retry(log, l, p, fmt.Errorf("the GPU throttled during the run (clock-event reasons %#x, SM clock %d-%d MHz)",
			ex.Throttled.Reasons&r.cfg.Measure.throttleMask(), ex.Throttled.SMClockMin, ex.Throttled.SMClockMax))
	default:
		r.record(log, g, l, p, rc, ex)
	}
}

// takeRun reads the job's run and hands it to this lease; ok is false
// when there is nothing (more) to run, the job then being dealt with.
func (r *Runner) takeRun(log *slog.Logger, g Gang, l *queue.Lease) (Payload, *store.RunContext, bool) {
	ctx := r.hard
	var p Payload
	if err := json.Unmarshal(l.Payload, &p); err != nil || p.Run == 0 {
		log.Error("job without a run: failing it", "payload", string(l.Payload))
		r.finishJob(log, l, queue.Failed, 0, "bad payload")
		return p, nil, false
	}
	log = log.With(logRun, p.Run, logSubmission, p.Submission)
	started, err := r.store.StartRun(ctx, p.Run, l.Token, g.IDs())
	if errors.Is(err, store.ErrRunMissing) {
		r.missingRun(log, l, p)
		return p, nil, false
	}
	if err != nil {
		r.retry(log, l, p, err)
		return p, nil, false
	}
	if !started {
		// Ended already: cancelled, or stored before a crash.
		r.finishJob(log, l, queue.Succeeded, 0, "")
		return p, nil, false
	}
	if err := r.queue.Start(ctx, l); err != nil {
		log.Warn("start job", "err", err)
		return p, nil, false
	}
	rc, err := r.store.LoadRun(ctx, p.Run)
	if errors.Is(err, store.ErrDamaged) {
		// No attempt will read it better: the run fails now, as the box's
		// fault, and the operator is told.
		log.Error("the run's stored code is damaged: failing it", "err", err)
		res := store.RunResult{Status: store.RunError, Reason: "the box's stored copy of this code is damaged; submit it again"}
		if _, err := r.store.FinishRun(context.WithoutCancel(ctx), p.Run, l.Token, res); err != nil {
			log.Warn("store failed run", "err", err)
		}
		r.finishJob(log, l, queue.Failed, 0, "stored code damaged")
		return p, nil, false
	}
	if err != nil {
		r.retry(log, l, p, err)
		return p, nil, false
	}
	return p, rc, true
}

// missingRun ends a job whose run the store has no row for. A deleted
// submission's job is cancelled; any other is the store's loss (a damaged
// or restored database), which must never read as a success: the job
// fails and the operator is told.
func (r *Runner) missingRun(log *slog.Logger, l *queue.Lease, p Payload) {
	deleted, err := r.store.DeletedSubmission(r.hard, p.Submission)
	if err != nil {
		r.retry(log, l, p, err)
		return
	}
	if deleted {
		log.Info("the job's submission was deleted: cancelling the job")
		r.finishJob(log, l, queue.Cancelled, 0, "its submission was deleted")
		return
	}
	log.Error("the store has no row for this job's run: the database lost it (damaged, or an older copy restored); failing the job")
	r.finishJob(log, l, queue.Failed, 0, fmt.Sprintf("run %d is missing from the store", p.Run))
}

// heartbeat keeps a job's lease while it runs. Its ctx ends when the
// lease is lost (cancelled, or reaped), which stops the run.
type heartbeat struct {
	ctx    context.Context
	cancel context.CancelFunc
	lost   chan struct{}
	done   chan struct{}
}

func (r *Runner) heartbeat(log *slog.Logger, l *queue.Lease) *heartbeat {
	ctx, cancel := context.WithCancel(r.hard)
	hb := &heartbeat{ctx: ctx, cancel: cancel, lost: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(hb.done)
		t := time.NewTicker(r.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := r.queue.Heartbeat(ctx, l, r.cfg.LeaseTTL)
			if errors.Is(err, queue.ErrLeaseLost) {
				log.Info("lease lost (cancelled or reaped): stopping the run")
				close(hb.lost)
				cancel()
				return
			}
			if err != nil && ctx.Err() == nil {
				log.Warn("heartbeat", "err", err)
			}
		}
	}()
	return hb
}

// stop ends the heartbeat, waits for it and says whether the lease was lost.
func (hb *heartbeat) stop() (lost bool) {
	hb.cancel()
	<-hb.done
	select {
	case <-hb.lost:
		return true
	default:
		return false
	}
}

// Execution is what a run left: the harness's report and the GPUs'
// readings around it.
type Execution struct {
	Report *problems.Report
	// Profile is the kept Nsight Compute report's name in ProfilesDir.
	Profile string
	Wall    time.Duration
	// Timed runs (not test mode, on a measured GPU) are gated and must not
	// throttle.
	Timed bool
	// Before is the lead GPU's reading at the gate; Tel its telemetry
	// across the run, Others a gang's other GPUs', Throttled the first
	// that throttled.
	Before    *gpu.Telemetry
	Tel       *gpu.RunTelemetry
	Others    []gpu.RunTelemetry
	Throttled *gpu.RunTelemetry
	// Info is what the machine that ran it says of itself (a Slurm node's
	// host, Python, GPU); nil for this box's own slots.
	Info map[string]any
}

// Execute runs the harness on the gang: the runner is the executor of
// this box's own slots. A timed run on a GPU waits for
// the GPU to be fit for it; a GPU that does not become so is the box's
// failure (an error, retried later elsewhere or again), never a verdict
// on the submission.
func (r *Runner) Execute(ctx context.Context, g Gang, rc *store.RunContext, take func(context.Context) error) (*Execution, error) {
	ex := &Execution{Timed: r.measured(g[0]) && problems.Mode(rc.Run.Mode) != problems.ModeTest}
	var samplers []*gpu.Sampler
	var begin time.Time
	// The run's sandbox may start before this passes (a warm start): the
	// harness prepares, and touches the gang only once it has.
	gate := func(ctx context.Context) error {
		if take != nil {
			if err := take(ctx); err != nil {
				return err
			}
		}
		if ex.Timed && r.cfg.Measure.Gate {
			for i, s := range g {
				if !r.measured(s) {
					continue
				}
				tel, err := r.monitor.Gate(ctx, s.GPU.UUID, r.cfg.Measure.gateConfig())
				if err != nil {
					return fmt.Errorf("pre-flight gate of %s: %w", s.ID, err)
				}
				if i == 0 {
					ex.Before = &tel
				}
			}
		}
		for _, s := range g {
			if r.measured(s) {
				samplers = append(samplers, r.monitor.Sample(s.GPU.UUID, r.cfg.Measure.SampleEvery, r.cfg.Measure.throttleMask()))
			}
		}
		begin = time.Now()
		return nil
	}
	rep, profile, err := r.evaluate(ctx, g, rc, gate)
	ex.Report, ex.Profile = rep, profile
	if !begin.IsZero() {
		ex.Wall = time.Since(begin)
	}
	for i, sm := range samplers {
		rt := sm.Stop()
		if i == 0 {
			ex.Tel = &rt
		} else {
			ex.Others = append(ex.Others, rt)
		}
		if rt.Throttled && ex.Throttled == nil {
			ex.Throttled = &rt
		}
	}
	return ex, err
}

// record stores the run's result, with what the box knows of the run, and
// finishes the job.
func (r *Runner) record(log *slog.Logger, g Gang, l *queue.Lease, p Payload, rc *store.RunContext, ex *Execution) {
	slot, rep := g[0], ex.Report
	res := store.RunResult{Status: api.StatusDone, Passed: rep.Passed, Reason: rep.Reason, Profile: ex.Profile}
	for _, f := range rep.Flags {
		res.Findings = append(res.Findings, policies.Finding{Rule: f.Rule, Verdict: policies.ScanFlag, Message: f.Message})
	}
	if ex.Tel != nil {
		res.Telemetry, _ = json.Marshal(struct {
			Gate *gpu.Telemetry `json:"gate,omitempty"`
			*gpu.RunTelemetry
			Others []gpu.RunTelemetry `json:"others,omitempty"` // a gang's other GPUs
		}{ex.Before, ex.Tel, ex.Others})
	}
	if rep.Passed && rc.Run.Mode == string(problems.ModeLeaderboard) {
		res.Score, res.ScoreErr = rep.Score, rep.ScoreErr
	}
	res.Report, _ = json.Marshal(rep)
	info := ex.Info // a Slurm node's, of itself
	if info == nil {
		info = r.SystemInfo(g, ex.Wall)
	}
	res.SystemInfo, _ = json.Marshal(info)
	if rep.Passed { // a failed run ranks nothing, whatever its isolation
		res.Unsandboxed, res.Unranked = isolationVerdict(rc, info, r.cfg.UnrankUnsandboxed)
	}
	if _, err := r.store.FinishRun(context.WithoutCancel(r.hard), p.Run, l.Token, res); err != nil {
		log.Warn("store run result", "err", err)
		return
	}
	log.Info("run finished", "passed", rep.Passed, "wall", ex.Wall.Round(time.Millisecond))
	outcome := "failed"
	if rep.Passed {
		outcome = "passed"
	}
	r.metrics.Run(slot.GPUType, rc.Run.Mode, outcome, ex.Wall)
	r.finishJob(log, l, queue.Succeeded, ex.Wall, "")
}

// SystemInfo is what this runner's machine says of itself and of the
// gang a run took, stored with the run.
func (r *Runner) SystemInfo(g Gang, wall time.Duration) map[string]any {
	slot := g[0]
	info := map[string]any{"slot": g.IDs(), "gpu": slot.GPUType, "device": slot.Device,
		"python": r.python.Path, "torch": r.python.Torch, "kernelbox": r.cfg.Version, "wall_ns": wall,
		logIsolation: hostIsolation(r.cfg.Sandbox)}
	if slot.GPU != nil {
		info["gpu_uuid"], info["gpu_name"], info["driver"], info["clocks"] = slot.GPU.UUID, slot.GPU.Name, r.cfg.Driver, slot.Clocks
	}
	if len(g) > 1 {
		info["gpus"] = len(g)
	}
	return info
}

func (r *Runner) finishJob(log *slog.Logger, l *queue.Lease, st queue.State, gpuTime time.Duration, why string) {
	if err := r.queue.Finish(context.WithoutCancel(r.hard), l, st, gpuTime, why); err != nil {
		log.Warn("finish job", "err", err)
	}
}

// retry hands an infrastructure failure back to the queue; with no
// attempts left the run ends as an error (the user's code may be fine).
func (r *Runner) retry(log *slog.Logger, l *queue.Lease, p Payload, cause error) {
	ctx := context.WithoutCancel(r.hard)
	log.Error("run could not be carried out", "attempt", l.Attempts, "err", cause)
	again, err := r.queue.Retry(ctx, l, time.Second, cause.Error())
	if err != nil {
		log.Warn("retry job", "err", err)
		return
	}
	if again {
		_ = r.store.AppendEvent(ctx, p.Submission, api.RunRetried{Run: p.Run, Attempt: l.Attempts})
		return
	}
	res := store.RunResult{Status: store.RunError, Reason: fmt.Sprintf("the box could not run it (%d attempts): %v", l.Attempts, cause)}
	if _, err := r.store.FinishRun(ctx, p.Run, l.Token, res); err != nil {
		log.Warn("store failed run", "err", err)
	}
}

// evaluate runs the harness for one run in a fresh work directory.
func (r *Runner) evaluate(ctx context.Context, g Gang, rc *store.RunContext, gate func(context.Context) error) (*problems.Report, string, error) {
	slot := g[0]
	t, err := r.tasks(rc.Leaderboard)
	if err != nil {
		return nil, "", err
	}
	scratch, err := os.MkdirTemp(r.cfg.WorkRoot, fmt.Sprintf("run-%d-", rc.Run.ID))
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
	launcher, done := r.standbyLauncher(r.log.With(logSlot, g.IDs(), logRun, rc.Run.ID), g, launcher)
	defer done()
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
		Profiler: profiler, Ceilings: r.cfg.Measure.ceilings(slot), FloorSlack: r.cfg.Measure.FloorSlack,
		Mode: mode, Python: r.python.Path, Device: slot.Device, Seed: seed, Env: env, WorkDir: work, GPUs: len(g), Gate: gate,
		Submission: rc.Code, SubmissionName: rc.Submission.FileName, OutputLimit: runOutputLimit,
		Cache: r.cacheFor(rc), Arch: slot.GPUType,
		OnTest: func(phase string, tr problems.TestResult) {
			if rc.Run.Secret {
				return // its cases carry the secret seed
			}
			ev := api.RunTest{Run: rc.Run.ID, Phase: phase, Index: tr.Index, Spec: tr.Spec, Status: tr.Status}
			if err := r.appendEvent(ctx, subID, ev); err != nil {
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
			if err := r.appendEvent(ctx, subID, ev); err != nil {
				r.log.Warn("log phase", logRun, rc.Run.ID, "err", err)
			}
		},
	})
	if err != nil {
		return nil, "", err
	}
	if why := rep.HarnessFault(); why != "" {
		return nil, "", fmt.Errorf("the harness failed, not the submission: %s", why)
	}
	// The work directory goes when this returns: keep the report first.
	name, err := r.keepProfile(rc.Run.ID, rep.Profile)
	return rep, name, err
}

// appendEvent logs a run's progress where this runner keeps it.
func (r *Runner) appendEvent(ctx context.Context, subID int64, p api.Payload) error {
	if r.events != nil {
		return r.events(ctx, subID, p)
	}
	return r.store.AppendEvent(ctx, subID, p)
}
