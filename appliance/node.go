package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

// The node side of the slurm executor: `kernelbox node run-job`, which a
// Slurm job runs on the node Slurm picked. It fetches its run from the
// coordinator, runs it as the box runs its own (the same sandbox, gate,
// clocks, telemetry and harness: runner.execute) on the GPUs Slurm gave
// the job, and reports the result. Judging and recording stay with the
// coordinator.

// NodeOptions is one `kernelbox node run-job`.
type NodeOptions struct {
	Coordinator string // the coordinator's API
	// SharedDir, in place of Coordinator, is the coordinator's part of
	// the cluster's shared directory (slurm.shared_dir): the job and its
	// report go through it.
	SharedDir string
	Run       int64
	Token     string // the run's job token
	// What Slurm says of the job: SLURM_JOB_ID, SLURM_JOB_GPUS (the
	// node's GPU indices it allocated) and SLURMD_NODENAME.
	SlurmJob, GPUs, Node string
}

// nodeLink is how a node reaches its coordinator: the node API, or the
// shared directory.
type nodeLink interface {
	job(context.Context) (*api.NodeJob, error)
	event(context.Context, api.NodeEvent) error
	// result reports the run's end; a report the coordinator has already
	// is no error.
	result(context.Context, api.NodeResult) error
	// standing says whether the attempt still stands (nodewatch.go).
	standing(context.Context) (bool, error)
	close()
}

// link is the node's way to its coordinator, and what to call it in
// errors.
func (o NodeOptions) link(log *slog.Logger) (nodeLink, string, error) {
	switch {
	case o.SharedDir != "" && o.Coordinator != "":
		return nil, "", errors.New("give the coordinator's API or the shared directory, not both")
	case o.SharedDir != "":
		return &spoolLink{dir: spoolAttempt(o.SharedDir, o.Token), run: o.Run, log: log}, o.SharedDir, nil
	}
	c, err := api.NewClient(o.Coordinator, o.Token)
	if err != nil {
		return nil, "", err
	}
	return &apiLink{c: c, run: o.Run, log: log}, o.Coordinator, nil
}

// RunNodeJob carries out one run on this node and reports it. A failure
// to carry it out is reported too (the coordinator tries again); the error
// returned is for what could not be reported at all, or for a GPU left
// unhealthy by the run (found after the report: Slurm then shows the job
// failed, for the cluster's operators).
func RunNodeJob(ctx context.Context, cfg Config, o NodeOptions, log *slog.Logger) error {
	log = log.With(logRun, o.Run, logSlurmJob, o.SlurmJob)
	link, where, err := o.link(log)
	if err != nil {
		return err
	}
	defer link.close()
	fetchCtx, cancel := context.WithTimeout(ctx, time.Minute) // a coordinator that hangs must not hold the GPUs
	job, err := link.job(fetchCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("fetch run %d from %s: %w", o.Run, where, err)
	}
	// An attempt the coordinator gave up stops here, as on scancel.
	ctx, superseded := context.WithCancelCause(ctx)
	defer superseded(nil)
	stopWatch := watchAttempt(ctx, link, job.CheckEvery, superseded, log)
	defer stopWatch()
	// runOnNode reports when it gets as far as a result, and fails only
	// before that: an error means nothing was reported. Once it reports,
	// the attempt ends and the watch with it.
	var reportErr error
	report := func(res api.NodeResult) { stopWatch(); reportErr = link.result(ctx, res) }
	unwell, err := runOnNode(ctx, cfg, o, *job, link, log, report)
	if ctx.Err() != nil && err != nil {
		// Cancelled (scancel), or superseded: the coordinator has given
		// the run up.
		log.Info("stopped before the end", "why", context.Cause(ctx))
		return nil
	}
	if err != nil {
		log.Error("the run could not be carried out here", "err", err)
		report(api.NodeResult{Error: fmt.Sprintf("node %s: %v", o.Node, err)})
	}
	if reportErr != nil {
		return fmt.Errorf("report run %d to %s: %w", o.Run, where, reportErr)
	}
	if len(unwell) > 0 {
		return fmt.Errorf("a GPU is unhealthy after the run, drain this node in Slurm (scontrol update nodename=%s state=drain reason=kernelbox): %s",
			o.Node, strings.Join(unwell, "; "))
	}
	return nil
}

// apiLink reaches the coordinator through the node API.
type apiLink struct {
	c   *api.Client
	run int64
	log *slog.Logger
}

func (l *apiLink) job(ctx context.Context) (*api.NodeJob, error) { return l.c.NodeJob(ctx, l.run) }

func (l *apiLink) event(ctx context.Context, ev api.NodeEvent) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return l.c.NodeEvent(ctx, l.run, ev)
}

func (l *apiLink) close() { l.c.Close() }

// result reports a run's end; the coordinator may be restarting, so a
// report is worth a few tries (1+2+3+4 s apart). A report the coordinator
// already has (its answer lost) is done; one too large for it goes again
// without its Nsight Compute report, which the summary then says.
func (l *apiLink) result(ctx context.Context, res api.NodeResult) error {
	log := l.log
	var err error
	for try := 1; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err = l.c.NodeResult(rctx, l.run, res)
		cancel()
		code := api.ErrorCode(err)
		switch {
		case err == nil:
			log.Info("reported", "passed", res.Report != nil && res.Report.Passed, "error", res.Error)
			return nil
		case code == api.CodeConflict:
			log.Info("the coordinator had the report already")
			return nil
		case code == api.CodeTooLarge && len(res.Profile) > 0:
			log.Warn("the report is too large for the coordinator: sending it without the Nsight Compute report", "bytes", len(res.Profile), "err", err)
			res = withoutProfile(res)
			continue
		case try == 5 || code == api.CodeUnauthorized || code == api.CodeInvalid || code == api.CodeTooLarge || ctx.Err() != nil:
			return err
		}
		log.Warn("report to the coordinator", "try", try, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * time.Second):
		}
	}
}

// withoutProfile is a report without its Nsight Compute report, which the
// profile's summary then says.
func withoutProfile(res api.NodeResult) api.NodeResult {
	if res.Report != nil && res.Report.Profile != nil {
		rep := *res.Report
		prof := *rep.Profile
		prof.Summary += fmt.Sprintf("\n(the report, %d bytes, was over the coordinator's limit and was not kept)\n", len(res.Profile))
		rep.Profile = &prof
		res.Report = &rep
	}
	res.Profile = nil
	return res
}

// runOnNode runs the job here, in a directory of its own under the data
// directory, with a sandbox runtime and cgroup of its own: other runs'
// jobs may share the node.
//
// report is called with the result as soon as there is one; the GPUs'
// health is checked after it (as a box checks it after recording), and
// what is wrong with them is returned.
func runOnNode(ctx context.Context, cfg Config, o NodeOptions, job api.NodeJob, link nodeLink, log *slog.Logger,
	report func(api.NodeResult)) (unwell []string, err error) {
	begin := time.Now()
	key := o.SlurmJob
	if _, err := strconv.ParseUint(key, 10, 64); err != nil {
		key = fmt.Sprintf("run%d-%d", job.Run, os.Getpid()) // run by hand, not by Slurm
	}
	nodeDir := filepath.Join(cfg.DataDir, "node")
	sweepNodeJobs(cfg, nodeDir, log)
	ncfg := cfg
	ncfg.DataDir = filepath.Join(nodeDir, "job-"+key)
	ncfg.CgroupParent = nodeJobCgroup(cfg, "job-"+key)
	if err := os.MkdirAll(ncfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	defer os.RemoveAll(ncfg.DataDir)
	d := NewDaemon(ncfg, log)
	// Held while the job lives: another job's sweep leaves it alone.
	if d.lock, err = lockDataDir(ncfg.DataDir); err != nil {
		return nil, err
	}
	defer removeCgroup(ncfg.CgroupParent)
	defer d.closeAll()
	probes := filepath.Join(nodeDir, "python.json")
	d.Python = cachedPython(probes, cfg.Python)
	it, launch, health := d.prepareRunner(ctx, newMetrics())
	if len(health) > 0 {
		return nil, errors.New(strings.Join(health, "; "))
	}
	if d.Python == nil {
		keepPython(probes, cfg.Python, it, log)
	}
	slots, err := d.nodeSlots(ctx, job, o.GPUs)
	if err != nil {
		return nil, err
	}
	d.openMonitor(slots)
	d.setupProfiler()
	task, err := writeNodeProblem(filepath.Join(ncfg.DataDir, "problem"), job)
	if err != nil {
		return nil, err
	}
	// A runner that is never started: the node runs its one job with it.
	rcfg := runnerConfig(cfg, "")
	rcfg.WorkRoot, rcfg.ProfilesDir = filepath.Join(ncfg.DataDir, "work"), filepath.Join(ncfg.DataDir, "profiles")
	rcfg.Driver = d.inventory.Driver
	deps := runner.Deps{Config: rcfg, Slots: slots, Launch: launch, Python: it, Profiler: d.profiler, Log: log,
		TasksFunc:  func(*store.Leaderboard) (*problems.Task, error) { return task, nil },
		EventsFunc: nodeEvents(link)}
	if d.monitor != nil {
		deps.Monitor = d.monitor
	}
	r := runner.New(deps)
	if err := os.MkdirAll(rcfg.WorkRoot, 0o700); err != nil {
		return nil, err
	}
	rc := nodeRunContext(job)
	defer r.HoldCache(log, rc)()
	log.Info("node ready", "setup", time.Since(begin).Round(time.Millisecond), "python", it.Path, "slots", runner.Gang(slots).IDs())
	ex, err := r.Execute(ctx, runner.Gang(slots), rc, nil)
	if err != nil {
		return nil, err
	}
	res, err := nodeResult(r, rcfg.ProfilesDir, ex, runner.Gang(slots))
	if err != nil {
		return nil, err
	}
	report(res)
	for _, s := range slots {
		for _, p := range r.HealthProblems(ctx, log, s) {
			unwell = append(unwell, s.ID+": "+p)
		}
	}
	return unwell, nil
}

// nodeSlots are the slots of the GPUs Slurm gave the job (SLURM_JOB_GPUS,
// the node's GPU indices), or CPU slots for a CPU pool's job. A ranked
// run's job has the node to itself (--exclusive), and Slurm then gives it
// every GPU of the node: the run takes as many as it needs of the pool's
// type, picked as the box picks a gang (shared links first). A job whose
// GPUs are of another type is refused: a leaderboard never mixes times
// from two kinds of GPU.
func (d *Daemon) nodeSlots(ctx context.Context, job api.NodeJob, slurmGPUs string) ([]runner.Slot, error) {
	cpus := runner.AllowedCPUs()
	if job.GPUType == "cpu" {
		return runner.CPUSlots(max(job.GPUs, 1), cpus), nil
	}
	if d.cfg.GPUs != "auto" {
		return nil, fmt.Errorf("the run wants %s GPUs and this node's config says gpus: none", job.GPUType)
	}
	if slurmGPUs == "" {
		return nil, fmt.Errorf("no GPUs from Slurm for the job (SLURM_JOB_GPUS is empty): give the %s pool its gres", job.GPUType)
	}
	ids, err := gpu.ParseCPUList(slurmGPUs) // the same list syntax: 0,2-3
	if err != nil {
		return nil, fmt.Errorf("SLURM_JOB_GPUS %q: %w", slurmGPUs, err)
	}
	d.inventory = gpu.Discover(ctx, gpu.Options{NVML: d.nvml, Root: d.gpuRoot, Aliases: d.cfg.GPUAliases})
	all := runner.GPUSlots(d.inventory, cpus)
	var mine []runner.Slot
	var others []string
	for _, id := range ids {
		s, ok := slotOfIndex(all, id)
		if !ok {
			return nil, fmt.Errorf("GPU %d, which Slurm gave the job, is not on this node (%d found: %s)", id, len(all), strings.Join(d.inventory.Notes, "; "))
		}
		if s.GPUType != job.GPUType {
			others = append(others, fmt.Sprintf("GPU %d is a %s", id, s.GPUType))
			continue
		}
		mine = append(mine, s)
	}
	if len(mine) < job.GPUs {
		why := fmt.Sprintf("the job has %d %s GPUs from Slurm (%s) and the run needs %d", len(mine), job.GPUType, slurmGPUs, job.GPUs)
		if len(others) > 0 {
			why += "; " + strings.Join(others, ", ") + ": map this GRES to that type in the coordinator's slurm.pools, or fix gpu_aliases here"
		}
		return nil, errors.New(why)
	}
	return runner.PickGang(mine, job.GPUs), nil
}

// slotOfIndex finds Slurm's GPU index among the slots: Slurm counts the
// device files of gres.conf (/dev/nvidia<N>), which NVML's order need
// not follow; without such a node the discovery index stands in.
func slotOfIndex(all []runner.Slot, id int) (runner.Slot, bool) {
	dev := fmt.Sprintf("/dev/nvidia%d", id)
	for _, s := range all {
		for _, n := range s.GPU.Nodes {
			if n.Path == dev {
				return s, true
			}
		}
	}
	for _, s := range all {
		if s.GPU.Index == id {
			return s, true
		}
	}
	return runner.Slot{}, false
}

// writeNodeProblem puts the job's problem files in dir and loads them,
// checking they are the files the coordinator loaded.
//
// A problem may use files beside its directory (the bundled problems
// share ../harness): the problem's directory is put as deep under dir as
// its files reach up, so that every file lands inside dir.
func writeNodeProblem(dir string, job api.NodeJob) (*problems.Task, error) {
	depth := 0
	for name := range job.Problem {
		p, up := path.Clean(name), 0
		for ; strings.HasPrefix(p, "../"); up++ {
			p = p[3:]
		}
		if path.IsAbs(p) || p == ".." || p == "." {
			return nil, fmt.Errorf("problem file %q is not a file of the problem", name)
		}
		depth = max(depth, up)
	}
	base := dir
	for range depth {
		base = filepath.Join(base, "p")
	}
	for name, data := range job.Problem {
		p := filepath.Join(base, filepath.FromSlash(name))
		if rel, err := filepath.Rel(dir, p); err != nil || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("problem file %q is not a file of the problem", name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, err
		}
	}
	t, err := problems.LoadTask(base)
	if err != nil {
		return nil, err
	}
	t.Name = job.Leaderboard
	sha, err := t.Fingerprint()
	if err != nil {
		return nil, err
	}
	if sha != job.ProblemSHA {
		return nil, fmt.Errorf("the problem of %s arrived changed (fingerprint %s, the coordinator's %s)", job.Leaderboard, sha, job.ProblemSHA)
	}
	return t, nil
}

// nodeRunContext is the job as runner.execute reads a stored run.
func nodeRunContext(job api.NodeJob) *store.RunContext {
	lb := &store.Leaderboard{Leaderboard: api.Leaderboard{Name: job.Leaderboard}}
	if job.Seed != nil {
		lb.SecretSeed = *job.Seed
	}
	sub := store.SubmissionOf(api.Submission{ID: job.Submission, Leaderboard: job.Leaderboard, User: job.User,
		FileName: job.FileName, GPUType: job.GPUType, Mode: job.Mode}, job.UserID)
	return &store.RunContext{Run: store.RunRecord{Run: api.Run{ID: job.Run, Secret: job.Secret, Mode: job.Mode, GPUType: job.GPUType}},
		Submission: sub, Leaderboard: lb, Code: job.Code}
}

// nodeEvents sends a run's progress to the coordinator, which logs it for
// the submitter's live view.
func nodeEvents(link nodeLink) func(context.Context, int64, api.Payload) error {
	return func(ctx context.Context, _ int64, p api.Payload) error {
		switch ev := p.(type) {
		case api.RunTest:
			return link.event(ctx, api.NodeEvent{Test: &ev})
		case api.RunPhase:
			return link.event(ctx, api.NodeEvent{Phase: &ev})
		}
		return fmt.Errorf("a node does not report %s events", p.EventKind())
	}
}

// nodeResult is the execution as the coordinator takes it back; the
// kept profile is in profiles.
func nodeResult(r *runner.Runner, profiles string, ex *runner.Execution, g runner.Gang) (api.NodeResult, error) {
	res := api.NodeResult{Report: ex.Report, Wall: ex.Wall, Timed: ex.Timed}
	if ex.Tel != nil || ex.Before != nil {
		tel, err := json.Marshal(nodeTelemetry{Gate: ex.Before, Run: ex.Tel, Others: ex.Others, Throttled: ex.Throttled})
		if err != nil {
			return res, err
		}
		res.Telemetry = tel
	}
	if ex.Profile != "" {
		data, err := os.ReadFile(filepath.Join(profiles, ex.Profile))
		if err != nil {
			return res, fmt.Errorf("read the kept profile: %w", err)
		}
		res.Profile = data
	}
	res.System = r.SystemInfo(g, ex.Wall)
	res.System["node"], _ = os.Hostname()
	return res, nil
}

// nodeJobCgroup is the cgroup parent of the job whose directory under
// DATA/node is dir (job-<id>): one name for the job that makes it and the
// sweep that removes what a killed job left. It is always outside the
// cgroup Slurm gives the job, which nothing here takes as delegated.
func nodeJobCgroup(cfg Config, dir string) string {
	parent := cfg.CgroupParent
	if parent == "" {
		parent = sandbox.DefaultCgroupParent(cfg.DataDir)
	}
	return parent + "-" + dir
}

// removeCgroup removes a job's cgroup parent once its sandboxes are gone
// (cgroup v2, or each v1 hierarchy); a leftover is only untidy.
func removeCgroup(name string) {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	for _, d := range append(dirs, "/sys/fs/cgroup/"+name) {
		_ = os.Remove(d)
	}
}

// A node's jobs each start a process that needs the harness interpreter;
// probing it imports torch (seconds with CUDA), so a probe is kept for an
// hour, for as long as the interpreter's and torch's directories are
// unchanged (an upgrade changes them).
const pythonProbeLife = time.Hour

type pythonProbe struct {
	Config string               `json:"config"` // the config's python ("" for discovery)
	Stamp  string               `json:"stamp"`
	At     time.Time            `json:"at"`
	It     problems.Interpreter `json:"interpreter"`
}

// pythonStamp is the modification times of the interpreter's directories.
func pythonStamp(it problems.Interpreter) string {
	var b strings.Builder
	for _, d := range append([]string{it.Path}, it.Dirs...) {
		st, err := os.Stat(d)
		if err != nil {
			return ""
		}
		fmt.Fprintf(&b, "%s@%d;", d, st.ModTime().UnixNano())
	}
	return b.String()
}

func cachedPython(file, configured string) *problems.Interpreter {
	var p pythonProbe
	data, err := os.ReadFile(file)
	if err != nil || json.Unmarshal(data, &p) != nil {
		return nil
	}
	if p.Config != configured || time.Since(p.At) > pythonProbeLife || p.Stamp == "" || p.Stamp != pythonStamp(p.It) {
		return nil
	}
	return &p.It
}

func keepPython(file, configured string, it *problems.Interpreter, log *slog.Logger) {
	if it == nil || it.Path == "" {
		return
	}
	data, err := json.Marshal(pythonProbe{Config: configured, Stamp: pythonStamp(*it), At: time.Now(), It: *it})
	if err == nil {
		err = problems.WriteFileAtomic(file, func(w io.Writer) error { _, err := w.Write(data); return err })
	}
	if err != nil {
		log.Warn("keep the Python probe", "err", err)
	}
}

// sweepNodeJobs cleans up after the node's jobs that ended without
// doing it themselves (killed outright: SIGKILL after Slurm's KillWait, a
// node that lost power): their sandboxes, still running or mounted, their
// cgroups and their directories. A job holds its directory's lock while
// it lives, so a directory whose lock is free is a dead job's; one made
// in the last seconds may not hold its lock yet, and waits for the next.
func sweepNodeJobs(cfg Config, dir string, log *slog.Logger) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "job-") || err != nil || time.Since(info.ModTime()) < 10*time.Second {
			continue
		}
		p := filepath.Join(dir, e.Name())
		lock, err := lockDataDir(p)
		if err != nil {
			continue // alive
		}
		sb := filepath.Join(p, "sandbox")
		if rt, err := sandbox.NewRuntime(sb, log); err == nil {
			if err := rt.SetCgroupParent(nodeJobCgroup(cfg, e.Name())); err == nil {
				if n, err := rt.CleanStale(); err == nil && n > 0 {
					log.Warn("stopped the sandboxes a killed job left", "dir", e.Name(), "containers", n)
				}
			}
			_ = rt.Close()
		}
		_ = unix.Unmount(sb, unix.MNT_DETACH) // a mount found, not made, by NewRuntime
		removeCgroup(nodeJobCgroup(cfg, e.Name()))
		lock.Close()
		if err := os.RemoveAll(p); err != nil {
			log.Warn("remove a killed job's directory", "dir", e.Name(), "err", err)
			continue
		}
		log.Info("removed what a killed job left", "dir", e.Name())
	}
}
