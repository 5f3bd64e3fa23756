package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// job is one leased job's life on a gang, from taking its run to
// recording it: River's shape, one object per job with its collaborators
// as fields, so that the steps below share them instead of passing them
// along.
type job struct {
	r     *Runner
	log   *slog.Logger
	gang  Gang
	lease *queue.Lease
	// take, when set, is a warm job's wait for its slot (warm.go): the
	// run starts before the gang is its own and takes it at the gate.
	take func(context.Context) error
	p    Payload           // what the lease carries (take)
	rc   *store.RunContext // the run, once taken
}

// handle runs one leased job to its end.
func (r *Runner) handle(log *slog.Logger, g Gang, l *queue.Lease, take func(context.Context) error) {
	j := &job{r: r, log: log.With(logJob, l.ID), gang: g, lease: l, take: take}
	j.run()
}

// run takes the lease over the run, executes it under a heartbeat (gate,
// sample, evaluate), judges what came back and records the result. The
// store's run row is written before the queue's job is finished; a crash
// between the two runs nothing twice, because the next holder finds the
// run ended (StartRun).
func (j *job) run() {
	r := j.r
	if !j.takeRun() {
		return
	}
	defer r.HoldCache(j.log, j.rc)() // pruned after the run, outside its timed part
	hb := r.heartbeat(j.log, j.lease)
	ex, err := r.exec.Execute(hb.ctx, j.gang, j.rc, j.take)
	if hb.stop() {
		return // whoever took the lease owns the job's state now
	}
	gpuType, mode := j.gang[0].GPUType, j.rc.Run.Mode
	switch {
	case err != nil && (r.hard.Err() != nil || errors.Is(err, errWarmStopped)):
		// Shutting down: the job did nothing wrong, give it back whole.
		if err := r.queue.Release(context.WithoutCancel(r.hard), j.lease, "daemon shut down during the run"); err != nil {
			j.log.Warn("release job", "err", err)
		}
	case err != nil:
		r.metrics.Run(gpuType, mode, "box_error", 0)
		j.retry(err)
	case ex.Timed && ex.Throttled != nil:
		// The timings are not comparable: run it again, and never score this one.
		r.metrics.Run(gpuType, mode, "throttled", 0)
		j.retry(fmt.Errorf("the GPU throttled during the run (clock-event reasons %#x, SM clock %d-%d MHz)",
			ex.Throttled.Reasons&r.cfg.Measure.throttleMask(), ex.Throttled.SMClockMin, ex.Throttled.SMClockMax))
	default:
		j.record(ex)
	}
}

// takeRun reads the job's run and hands it to this lease; it is false
// when there is nothing (more) to run, the job then being dealt with.
func (j *job) takeRun() bool {
	r, l, ctx := j.r, j.lease, j.r.hard
	if err := json.Unmarshal(l.Payload, &j.p); err != nil || j.p.Run == 0 {
		j.log.Error("job without a run: failing it", "payload", string(l.Payload))
		j.finish(queue.Failed, 0, "bad payload")
		return false
	}
	j.log = j.log.With(logRun, j.p.Run, logSubmission, j.p.Submission)
	started, err := r.store.StartRun(ctx, j.p.Run, l.Token, j.gang.IDs())
	if errors.Is(err, store.ErrRunMissing) {
		j.missingRun()
		return false
	}
	if err != nil {
		j.retry(err)
		return false
	}
	if !started {
		// Ended already: cancelled, or stored before a crash.
		j.finish(queue.Succeeded, 0, "")
		return false
	}
	if err := r.queue.Start(ctx, l); err != nil {
		j.log.Warn("start job", "err", err)
		return false
	}
	j.rc, err = r.store.LoadRun(ctx, j.p.Run)
	if errors.Is(err, store.ErrDamaged) {
		// No attempt will read it better: the run fails now, as the box's
		// fault, and the operator is told.
		j.log.Error("the run's stored code is damaged: failing it", "err", err)
		res := store.RunResult{Status: store.RunError, Reason: "the box's stored copy of this code is damaged; submit it again"}
		if _, err := r.store.FinishRun(context.WithoutCancel(ctx), j.p.Run, l.Token, res); err != nil {
			j.log.Warn("store failed run", "err", err)
		}
		j.finish(queue.Failed, 0, "stored code damaged")
		return false
	}
	if err != nil {
		j.retry(err)
		return false
	}
	return true
}

// missingRun ends a job whose run the store has no row for. A deleted
// submission's job is cancelled; any other is the store's loss (a damaged
// or restored database), which must never read as a success: the job
// fails and the operator is told.
func (j *job) missingRun() {
	deleted, err := j.r.store.DeletedSubmission(j.r.hard, j.p.Submission)
	if err != nil {
		j.retry(err)
		return
	}
	if deleted {
		j.log.Info("the job's submission was deleted: cancelling the job")
		j.finish(queue.Cancelled, 0, "its submission was deleted")
		return
	}
	j.log.Error("the store has no row for this job's run: the database lost it (damaged, or an older copy restored); failing the job")
	j.finish(queue.Failed, 0, fmt.Sprintf("run %d is missing from the store", j.p.Run))
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

// record stores the run's result, with what the box knows of the run, and
// finishes the job.
func (j *job) record(ex *Execution) {
	r, rc, rep := j.r, j.rc, ex.Report
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
		info = r.SystemInfo(j.gang, ex.Wall)
	}
	res.SystemInfo, _ = json.Marshal(info)
	if rep.Passed { // a failed run ranks nothing, whatever its isolation
		res.Unsandboxed, res.Unranked = isolationVerdict(rc, info, r.cfg.UnrankUnsandboxed)
	}
	if _, err := r.store.FinishRun(context.WithoutCancel(r.hard), j.p.Run, j.lease.Token, res); err != nil {
		j.log.Warn("store run result", "err", err)
		return
	}
	j.log.Info("run finished", "passed", rep.Passed, "wall", ex.Wall.Round(time.Millisecond))
	outcome := "failed"
	if rep.Passed {
		outcome = "passed"
	}
	r.metrics.Run(j.gang[0].GPUType, rc.Run.Mode, outcome, ex.Wall)
	j.finish(queue.Succeeded, ex.Wall, "")
}

// finish ends the job in the queue.
func (j *job) finish(st queue.State, gpuTime time.Duration, why string) {
	if err := j.r.queue.Finish(context.WithoutCancel(j.r.hard), j.lease, st, gpuTime, why); err != nil {
		j.log.Warn("finish job", "err", err)
	}
}

// retry hands an infrastructure failure back to the queue; with no
// attempts left the run ends as an error (the user's code may be fine).
func (j *job) retry(cause error) {
	r, l := j.r, j.lease
	ctx := context.WithoutCancel(r.hard)
	j.log.Error("run could not be carried out", "attempt", l.Attempts, "err", cause)
	again, err := r.queue.Retry(ctx, l, time.Second, cause.Error())
	if err != nil {
		j.log.Warn("retry job", "err", err)
		return
	}
	if again {
		_ = r.store.AppendEvent(ctx, j.p.Submission, api.RunRetried{Run: j.p.Run, Attempt: l.Attempts})
		return
	}
	res := store.RunResult{Status: store.RunError, Reason: fmt.Sprintf("the box could not run it (%d attempts): %v", l.Attempts, cause)}
	if _, err := r.store.FinishRun(ctx, j.p.Run, l.Token, res); err != nil {
		j.log.Warn("store failed run", "err", err)
	}
}
