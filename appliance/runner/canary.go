package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

// The canary evaluates a tiny bundled problem now and then, on each GPU
// type the box serves, through exactly the path a contestant's run takes:
// the runner's launcher (sandbox, seccomp, cgroups, binds, the daemon's
// uid, umask and cgroup parent), our harness and its judge. The daemon's
// other health checks look at parts; only a run proves they fit together.
// An installed box once reported itself ready while every sandboxed run
// failed on a directory mode (issue 38): the canary is what would have
// said so. Its runs are no contestant's: they touch neither the queue nor
// the store, only the slot they borrow.

// canaryProblem is the bundled problem the canary evaluates, in test mode
// on its first canaryTests cases, with canarySubmission.
const (
	canaryProblem = "vectoradd"
	canaryTests   = 2
)

// canarySubmission is an honest vectoradd in plain PyTorch: it runs on
// every backend.
const canarySubmission = `# kernelbox canary: an honest vectoradd.
def custom_kernel(data):
    a, b = data
    return a + b
`

// canaryLimit bounds one canary run: a test phase of two small cases
// takes a few seconds, a cold CUDA start ten or twenty.
const canaryLimit = 3 * time.Minute

// CanaryFix is the operator's next step for a failed canary, chosen by
// what its error says.
func CanaryFix(reason string) string {
	switch {
	case strings.Contains(reason, "permission denied"):
		return "the run's uid cannot read something it needs: check the modes of the data directory's sandbox/, " +
			"the harness Python's directories and config binds (a umask of 0077 must not reach them); " +
			"`kernelbox doctor` runs a canary of its own in a one-shot sandbox"
	case strings.Contains(reason, "no such file"):
		return "a path the run needs is missing inside the sandbox: check config python and binds; `kernelbox doctor` runs a canary of its own in a one-shot sandbox"
	case strings.Contains(reason, "cgroup"):
		return "the sandbox's cgroups could not be made: check config cgroup_parent and budget, and that the daemon runs as root"
	default:
		return "run `kernelbox doctor` on this host (its canary uses a one-shot sandbox on the CPU backend); `kernelbox sandbox run -- /bin/true` shows a sandbox error alone"
	}
}

// canaries holds each GPU type's last canary and when the next is due.
// The runner runs them (dispatch); the API reads them (health, metrics,
// the admin page).
//
// A failed canary may be one bad GPU rather than a broken host, so the
// type's next canary goes to a slot not yet tried since the last pass,
// at once; the type's jobs are held only once every usable slot has
// failed (or before the first canary has ended). A slot that failed while
// another passed stays in service: a job on it fails as before and the
// GPU health check after the job drains it.
type Canaries struct {
	every time.Duration // 0: no canary
	now   func() time.Time
	mu    sync.Mutex
	last  map[string]api.Canary
	due   map[string]time.Time
	// failed are the slots whose canary failed since the type's last
	// pass; running the types with a canary in flight.
	failed  map[string]map[string]bool
	running map[string]bool
}

func NewCanaries(every time.Duration, now func() time.Time) *Canaries {
	return &Canaries{every: every, now: now, last: map[string]api.Canary{}, due: map[string]time.Time{},
		failed: map[string]map[string]bool{}, running: map[string]bool{}}
}

// expect registers a GPU type whose slots run canaries: until its first
// canary ends, it is pending (and the box not ready).
func (c *Canaries) expect(gpuType string) {
	if c == nil || c.every <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.last[gpuType]; !ok {
		c.last[gpuType] = api.Canary{GPUType: gpuType, Pending: true}
	}
}

// unusable says every slot of gpuType is drained: no canary can run, and
// one that has not is not waited for (the drains say what is wrong).
func (c *Canaries) unusable(gpuType string) {
	if c == nil || c.every <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.last[gpuType]; ok && last.Pending {
		delete(c.last, gpuType)
	}
}

// take picks the slot of free that runs gpuType's canary now, if one is
// due and none is in flight: one not failed since the last pass if there
// is such a slot. ok is false when no canary starts.
func (c *Canaries) take(gpuType string, free []Slot) (Slot, bool) {
	if c == nil || c.every <= 0 || len(free) == 0 {
		return Slot{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.running[gpuType] || now.Before(c.due[gpuType]) {
		return Slot{}, false
	}
	c.running[gpuType] = true
	c.due[gpuType] = now.Add(c.every)
	for _, s := range free {
		if !c.failed[gpuType][s.ID] {
			return s, true
		}
	}
	return free[0], true
}

// holds says whether gpuType's jobs must wait: its first canary has not
// ended, or every one of its usable slots failed since the last pass.
func (c *Canaries) holds(gpuType string, usable int) bool {
	if c == nil || c.every <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.last[gpuType]
	return ok && (last.Pending || (!last.OK && len(c.failed[gpuType]) >= usable))
}

// record keeps a canary's outcome. After a failure, the next canary is
// due at once while a usable slot is left untried, else in a minute (or
// the interval, if shorter), so a fixed host is seen soon.
func (c *Canaries) record(res api.Canary, usable int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running[res.GPUType] = false
	c.last[res.GPUType] = res
	if res.OK {
		delete(c.failed, res.GPUType)
		return
	}
	if c.failed[res.GPUType] == nil {
		c.failed[res.GPUType] = map[string]bool{}
	}
	c.failed[res.GPUType][res.Slot] = true
	next := c.now().Add(min(time.Minute, c.every))
	if len(c.failed[res.GPUType]) < usable {
		next = c.now()
	}
	c.due[res.GPUType] = next
}

// abandon forgets a canary cut short by the runner's stop.
func (c *Canaries) abandon(gpuType string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running[gpuType] = false
}

// list is every registered type's last canary, by type.
func (c *Canaries) List() []api.Canary {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]api.Canary, 0, len(c.last))
	for _, k := range slices.Sorted(maps.Keys(c.last)) {
		out = append(out, c.last[k])
	}
	return out
}

// CanaryReasons are health's lines for canaries that failed or have not
// yet run.
func CanaryReasons(cs []api.Canary) []string {
	var out []string
	for _, c := range cs {
		switch {
		case c.Pending:
			out = append(out, fmt.Sprintf("canary on %s: the first check run has not finished yet", c.GPUType))
		case !c.OK:
			out = append(out, fmt.Sprintf("canary on %s failed at %s: %s (fix: %s)", c.GPUType, c.At.UTC().Format(time.RFC3339), c.Reason, c.Fix))
		}
	}
	return out
}

// CanaryRun is one evaluation of the canary problem with a launcher.
type CanaryRun struct {
	Launcher problems.Launcher
	Env      []string
	Python   string
	Device   string // cpu or cuda
	Arch     string // the GPU type
	// Scratch is a directory the run may fill; it is removed after.
	Scratch string
}

// RunCanary evaluates the canary problem and returns nil when the honest
// submission passed; the error says why it did not. `kernelbox doctor`
// runs it with a one-shot sandbox, the daemon on each GPU type's slots.
func RunCanary(ctx context.Context, in CanaryRun) error {
	ctx, cancel := context.WithTimeout(ctx, canaryLimit)
	defer cancel()
	lib := filepath.Join(in.Scratch, "library")
	if err := problems.ExportLibrary(lib); err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	t, err := problems.LoadTask(filepath.Join(lib, canaryProblem))
	if err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	t.Tests = t.Tests[:min(canaryTests, len(t.Tests))]
	work := filepath.Join(in.Scratch, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return fmt.Errorf("canary: %w", err)
	}
	rep, err := problems.Evaluate(ctx, in.Launcher, t, problems.EvalOptions{
		Mode: problems.ModeTest, Python: in.Python, Device: in.Device, Env: in.Env, WorkDir: work,
		Submission: []byte(canarySubmission), SubmissionName: "submission.py", OutputLimit: runOutputLimit, Arch: in.Arch, GPUs: 1,
	})
	switch {
	case err != nil:
		return fmt.Errorf("canary: %w", err)
	case !rep.Passed:
		why := rep.Reason
		for _, ph := range rep.Phases {
			if !ph.Passed && ph.Stderr != "" {
				why += ": " + lastLine(ph.Stderr)
				break
			}
		}
		return fmt.Errorf("canary: an honest submission did not pass: %s", why)
	}
	return nil
}

// lastLine is the last non-empty line of s: a traceback's exception.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// canaryJob marks a slot the canary holds in runner.busy: no queue job
// has id 0.
const canaryJob int64 = 0

// startCanary runs gpuType's canary on slot s, which the caller marked
// busy; the slot is freed when it ends. usable is how many of the type's
// slots are in service.
func (r *Runner) startCanary(log *slog.Logger, s Slot, usable int) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.busy.Delete(s.ID)
			r.wake.Fire()
		}()
		res := r.runCanary(s)
		if r.soft.Err() != nil {
			r.canary.abandon(s.GPUType)
			return // stopped, not failed
		}
		r.canary.record(res, usable)
		r.metrics.Canary(res)
		if res.OK {
			log.Debug("canary passed", logSlot, s.ID, "took", res.Took)
		} else {
			log.Error("canary failed: runs on this GPU type would fail the same way", logSlot, s.ID, "why", res.Reason, "fix", res.Fix)
		}
	}()
}

func (r *Runner) runCanary(s Slot) api.Canary {
	begin := time.Now()
	res := api.Canary{GPUType: s.GPUType, Slot: s.ID, At: r.canary.now()}
	err := func() error {
		scratch, err := os.MkdirTemp(r.cfg.WorkRoot, "canary-")
		if err != nil {
			return fmt.Errorf("canary: %w", err)
		}
		defer os.RemoveAll(scratch)
		launcher, env := r.launch(Gang{s}, problems.ModeTest)
		// Under the soft stop: a shutdown need not wait its grace for a
		// canary, whose result it would throw away.
		return RunCanary(r.soft, CanaryRun{Launcher: launcher, Env: env, Python: r.python.Path, Device: s.Device,
			Arch: s.GPUType, Scratch: scratch})
	}()
	res.Took = time.Since(begin)
	res.OK = err == nil
	if err != nil {
		res.Reason = err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			res.Reason = fmt.Sprintf("canary: no result within %s", canaryLimit)
		}
		res.Fix = CanaryFix(res.Reason)
	}
	return res
}
