package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kernelbox/problems"
)

// Standbys (issue 17): an idle GPU keeps our Python harness waiting in a
// sandbox of its own, its judge and workers with torch (and Triton)
// imported and nothing else done: no device touched, no user code, no
// problem known (problems/standby.go). The next run on that GPU that our
// harness can take over (a one-GPU run of a Python problem on our
// harness, not profiled) is handed to it at the gate: its files and
// arguments go in, the GPU's gate, health check and samplers pass as for
// any run, and the run skips the seconds of its cold start. Any other
// run first stops the standby. A standby serves one run and is destroyed,
// like every sandbox; the next one starts as soon as the last is taken,
// while its run still has the GPU: its seconds of imports (9 s on the
// H100 host) then overlap that run instead of delaying the next one. It
// waits at its gate with the least CPU weight (sandbox/gate.go), as a
// warm start does.
//
// The compile cache: a standby's sandbox is made before its submitter is
// known, so it gets an empty cache directory of its own; the run that
// takes it over finds its submitter's cache there (hard links, made at
// the gate) and what it builds goes back into the submitter's cache
// after the run (mergeCache). Nothing of one user's cache is ever in a
// standby another user's run can take: each standby's directory is new.

// standbyBackoff is how long a slot waits for its next standby after one
// ended on its own (its harness could not start): not a loop of failures.
const standbyBackoff = time.Minute

// runOutputLimit caps each captured stream of a run (EvalOptions).
const runOutputLimit = 64 << 10

// standby is one slot's harness waiting for a run.
type standby struct {
	slot   string
	launch problems.Launch // as started: Dir, Argv, Env, OutputLimit, Cache
	// handoff carries the run that takes it over.
	handoff chan handoff
	cancel  context.CancelFunc
	// done closes when the launch has returned, with out and err.
	done chan struct{}
	out  problems.Outcome
	err  error
	// taken is set once a run has it, under mu.
	mu    sync.Mutex
	taken bool
}

// handoff is a run for a standby: its gate, what the standby opens with,
// and the submitter's compile cache to bring in.
type handoff struct {
	ctx   context.Context
	gate  func(context.Context) error
	open  problems.Opening
	cache string
}

// take marks the standby as one run's; false when another run has it.
func (sb *standby) take() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.taken {
		return false
	}
	sb.taken = true
	return true
}

// stop ends a standby that its taker hands no run, and waits for its
// sandbox to be gone.
func (sb *standby) stop() {
	sb.cancel()
	<-sb.done
	if sb.launch.Cache != "" {
		os.RemoveAll(sb.launch.Cache)
	}
}

// wantsStandby says whether the dispatcher should start a standby for s:
// a fit GPU without one, busy or not, with no job warming for it, and
// not backing off.
func (r *Runner) wantsStandby(s Slot) bool {
	if !r.cfg.Standby || s.GPU == nil || r.python == nil || r.python.Path == "" || r.soft.Err() != nil {
		return false
	}
	if _, drained := r.drained.Load(s.ID); drained {
		return false
	}
	if _, warming := r.warm.Load(s.ID); warming {
		return false
	}
	if _, ok := r.standbys.Load(s.ID); ok {
		return false
	}
	if until, ok := r.standbyOff.Load(s.ID); ok && time.Now().Before(until.(time.Time)) {
		return false
	}
	return true
}

// tendStandbys starts a standby on each GPU of slots that lacks one,
// and stops those of drained GPUs. The dispatcher calls it when it has
// no job to hand out.
func (r *Runner) tendStandbys(log *slog.Logger, slots []Slot) {
	for _, s := range slots {
		if _, drained := r.drained.Load(s.ID); drained {
			r.stopStandby(s.ID)
			continue
		}
		if !r.wantsStandby(s) {
			continue
		}
		if err := r.startStandby(s); err != nil {
			r.standbyOff.Store(s.ID, time.Now().Add(standbyBackoff))
			log.Warn("start a standby", logSlot, s.ID, "err", err)
		}
	}
}

// startStandby starts s's standby in a goroutine of the runner's.
func (r *Runner) startStandby(s Slot) error {
	log := r.log.With(logSlot, s.ID)
	dir, err := os.MkdirTemp(r.cfg.WorkRoot, "standby-")
	if err != nil {
		return fmt.Errorf("standby for %s: %w", s.ID, err)
	}
	launcher, env := r.launch(Gang{s}, problems.ModeTest)
	l, err := problems.StandbyLaunch(dir, r.python.Path, env, runOutputLimit)
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("standby for %s: %w", s.ID, err)
	}
	if r.caches.dir(0) != "" {
		// A new directory beside the users' (one filesystem: hard links).
		if l.Cache, err = os.MkdirTemp(r.caches.standbyRoot(), "cache-"); err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("standby for %s: %w", s.ID, err)
		}
	}
	ctx, cancel := context.WithCancel(r.hard)
	sb := &standby{slot: s.ID, launch: l, handoff: make(chan handoff), cancel: cancel, done: make(chan struct{})}
	l.Standby = sb.await(r.soft)
	r.standbys.Store(s.ID, sb)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		began := time.Now()
		sb.out, sb.err = launcher.Launch(ctx, l)
		os.RemoveAll(dir)
		r.standbys.CompareAndDelete(s.ID, sb)
		taken := !sb.take() // nobody takes it now
		if !taken && l.Cache != "" {
			os.RemoveAll(l.Cache)
		}
		close(sb.done)
		if !taken && ctx.Err() == nil && r.soft.Err() == nil {
			r.standbyOff.Store(s.ID, time.Now().Add(standbyBackoff))
			log.Warn("a standby harness ended before a run came: none on this GPU for a while", "after", time.Since(began).Round(time.Millisecond),
				"exit", sb.out.ExitCode, "err", sb.err, "stderr", lastLines(string(sb.out.Stderr), 3), "backoff", standbyBackoff)
		}
		r.wake.Fire()
	}()
	log.Debug("standby started")
	return nil
}

// await is the standby's wait at its gate: for the run that takes it
// over, whose own gate it then passes (the slot, the GPU's pre-flight
// gate, the samplers) and whose submitter's cache it brings in. It gives
// up when the daemon stops claiming (soft) or the standby is stopped.
func (sb *standby) await(soft context.Context) func(context.Context) (problems.Opening, error) {
	return func(ctx context.Context) (problems.Opening, error) {
		var h handoff
		select {
		case h = <-sb.handoff:
		case <-ctx.Done():
			return problems.Opening{}, ctx.Err()
		case <-soft.Done():
			return problems.Opening{}, fmt.Errorf("standby: %w (the daemon is stopping)", errWarmStopped)
		}
		if err := h.gate(h.ctx); err != nil {
			return problems.Opening{}, err
		}
		if h.cache != "" {
			if err := cloneCache(h.cache, sb.launch.Cache); err != nil {
				return problems.Opening{}, fmt.Errorf("standby: bring in the compile cache: %w", err)
			}
		}
		return h.open, nil
	}
}

// standbyLauncher is the launcher of a run on g: base, or, when one of
// g's slots has a standby, a launcher that hands the run to it if it
// can and stops it otherwise. The standbys are this run's from here;
// done stops one the run never launched.
func (r *Runner) standbyLauncher(log *slog.Logger, g Gang, base problems.Launcher) (l problems.Launcher, done func()) {
	var mine []*standby
	for _, s := range g {
		if v, ok := r.standbys.LoadAndDelete(s.ID); ok {
			mine = append(mine, v.(*standby))
		}
	}
	if len(mine) == 0 {
		return base, func() {}
	}
	r.wake.Fire() // the dispatcher may start the next standby now
	if len(g) > 1 {
		stopStandbys(mine)
		return base, func() {}
	}
	a := &adopter{base: base, sb: mine[0], log: log, handed: &r.handed}
	return a, a.close
}

func stopStandbys(sbs []*standby) {
	for _, sb := range sbs {
		if sb.take() {
			sb.stop()
		}
	}
}

// adopter hands a run's launch to a standby when problems.Adopt says it
// can take it; every other launch stops the standby first.
type adopter struct {
	base   problems.Launcher
	log    *slog.Logger
	handed *atomic.Int64 // the runner's count of runs handed to standbys
	mu     sync.Mutex
	sb     *standby // nil once used or stopped
}

// own takes the standby out of the adopter, nil when it is gone.
func (a *adopter) own() *standby {
	a.mu.Lock()
	defer a.mu.Unlock()
	sb := a.sb
	a.sb = nil
	return sb
}

// close stops the standby if no launch came for it.
func (a *adopter) close() {
	if sb := a.own(); sb != nil {
		stopStandbys([]*standby{sb})
	}
}

func (a *adopter) Launch(ctx context.Context, in problems.Launch) (problems.Outcome, error) {
	sb := a.own()
	if sb == nil || !sb.take() {
		return a.base.Launch(ctx, in)
	}
	open, err := problems.Adopt(sb.launch, in)
	if err != nil {
		a.log.Debug("the standby cannot take this run: a sandbox of its own", "why", err)
		sb.stop()
		return a.base.Launch(ctx, in)
	}
	select {
	case sb.handoff <- handoff{ctx: ctx, gate: in.Gate, open: open, cache: in.Cache}:
	case <-sb.done:
		// It ended before the run came (a crashed harness): start afresh.
		a.log.Warn("the standby ended before its run came", "exit", sb.out.ExitCode, "err", sb.err)
		if sb.launch.Cache != "" {
			os.RemoveAll(sb.launch.Cache) // its own goroutine left it to the taker
		}
		return a.base.Launch(ctx, in)
	case <-ctx.Done():
		sb.stop()
		return problems.Outcome{}, ctx.Err()
	}
	a.handed.Add(1)
	a.log.Info("run handed to the standby")
	stop := context.AfterFunc(ctx, sb.cancel) // the run's end ends the standby's sandbox
	<-sb.done
	stop()
	if sb.launch.Cache != "" {
		if err := mergeCache(sb.launch.Cache, in.Cache); err != nil {
			a.log.Warn("keep what the run built in the compile cache", "err", err)
		}
		os.RemoveAll(sb.launch.Cache)
	}
	if sb.err == nil && ctx.Err() != nil {
		return sb.out, ctx.Err()
	}
	return sb.out, sb.err
}

// lastLines is s's last n lines, for a log line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// stopStandby stops slot id's standby if no run has taken it (the slot
// was drained).
func (r *Runner) stopStandby(id string) {
	if v, ok := r.standbys.LoadAndDelete(id); ok {
		stopStandbys([]*standby{v.(*standby)})
	}
}

// standbyRoot is where standbys' cache directories are made: beside the
// users' caches, on their filesystem.
func (c *userCaches) standbyRoot() string {
	dir := filepath.Join(c.root, "standby")
	_ = os.MkdirAll(dir, 0o700)
	return dir
}

// Handed is how many runs went to a standby harness.
func (r *Runner) Handed() int64 { return r.handed.Load() }

// Standby is slot's waiting standby harness, an identity that tells it from
// the next one; ok is false when the slot has none.
func (r *Runner) Standby(slot string) (id any, ok bool) { return r.standbys.Load(slot) }
