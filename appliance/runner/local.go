package runner

// The local executor: the runner itself carries out a run on this box's
// own slots, in its sandbox, and measures the GPUs around it.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/problems"
)

// Execute runs the harness on the gang: the runner is the executor of
// this box's own slots. A timed run on a GPU waits for the GPU to be fit
// for it; a GPU that does not become so is the box's failure (an error,
// retried later elsewhere or again), never a verdict on the submission.
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
