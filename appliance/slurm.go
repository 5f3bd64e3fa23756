package appliance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/problems"
)

// The slurm executor: the coordinator keeps the job table, the queue's
// order and the leaderboards; Slurm decides which node runs each job; the
// node (`kernelbox node run-job`, node.go) owns the sandbox, the gate,
// the clocks and the measurement, and reports back over the API with the
// run's job token (nodeapi.go).

// slurmJobName is every kernelbox job's name in Slurm; its comment names
// the coordinator's boot and the run, so that a restarted coordinator
// finds an earlier boot's jobs and cancels them.
const slurmJobName = "kernelbox"

// logSlurmJob is the log key (and system-info key) of a Slurm job id.
const logSlurmJob = "slurm_job"

// startCoordinator is Start for the slurm executor: no sandbox, Python or
// GPU here, only the pools' slots, whose runs go to Slurm.
func (d *Daemon) startCoordinator(ctx context.Context) error {
	it := d.Python
	if it == nil {
		it = &problems.Interpreter{}
	}
	sl := newSlurm(d.cfg, d.svc.boot, d.svc.runTask, d.log.With("component", "slurm"))
	sl.appendEvent = d.svc.store.AppendEvent
	if d.cfg.Slurm.Coordinator == "" {
		// No URL to name this coordinator by: an id of its own, kept in
		// its data directory, so that two coordinators on one shared
		// directory keep apart and a restart knows its earlier jobs.
		id, err := coordinatorID(filepath.Join(d.cfg.DataDir, "slurm-coordinator-id"))
		if err != nil {
			return err
		}
		sl.setName("id:" + id)
	}
	if sl.spool != "" {
		if err := openSpool(sl.spool, sl.log); err != nil {
			return err
		}
	}
	if err := sl.cancelOrphans(ctx); err != nil {
		// Not fatal: Slurm may be down for a moment; the orphans' reports
		// are refused (their tokens are gone) and they end by themselves.
		d.log.Warn("cancel an earlier coordinator's Slurm jobs", "err", err)
	}
	d.svc.nodeRuns = sl.runs
	d.svc.executorTrouble = sl.reach.reasons
	if err := d.svc.metrics.reg.Register(sl.reach); err != nil {
		return err
	}
	slots := d.cfg.Slurm.slots()
	deps := d.runnerDeps(slots, nil, it)
	deps.Executor = sl
	deps.Config.UnrankUnsandboxed = !d.cfg.Slurm.RankUnsandboxed
	// A pool's slot is a place in Slurm, not a GPU: nothing to keep warm.
	deps.Config.WarmStart, deps.Config.Standby = false, false
	d.runner = runner.New(deps)
	d.svc.offer(slots)
	var notes []string
	for _, p := range d.cfg.Slurm.Pools {
		notes = append(notes, fmt.Sprintf("Slurm pool %s: GRES %q, up to %d at once", p.GPUType, p.GRES, p.GPUs))
	}
	d.log.Info("runs go to Slurm", "partition", d.cfg.Slurm.Partition, "coordinator", d.cfg.Slurm.Coordinator,
		"shared_dir", sl.spool, "pools", len(d.cfg.Slurm.Pools))
	return d.startServing(ctx, api.GPUsStatus{Vendor: "slurm", Notes: notes, Profiler: "profile mode runs on the node: its ncu, when it has one"})
}

// slurm submits runs as Slurm jobs and waits for their nodes' reports.
type slurm struct {
	cfg         SlurmConfig
	boot        string
	runs        *nodeRuns
	tasks       func(*store.Leaderboard) (*problems.Task, error)
	log         *slog.Logger
	profilesDir string
	maxReport   int64
	// spool is this coordinator's part of slurm.shared_dir; empty when
	// the nodes report to the API.
	spool string
	// appendEvent logs a node's progress for the submission's live view.
	appendEvent func(ctx context.Context, sub int64, p api.Payload) error
	// hash names this coordinator in job comments and the shared
	// directory (setName).
	hash string
	// where says, by slot, where its run is out in Slurm (kernelbox gpus).
	where sync.Map
	board *jobBoard
	// reach is the controller's reach as the commands found it.
	reach *controllerReach
}

func (s *slurm) Remote(slot string) string {
	if v, ok := s.where.Load(slot); ok {
		return v.(string)
	}
	return ""
}

// tell records where a gang's run is out, or forgets it ("").
func (s *slurm) tell(g runner.Gang, where string) {
	for _, sl := range g {
		if where == "" {
			s.where.Delete(sl.ID)
		} else {
			s.where.Store(sl.ID, where)
		}
	}
}

var (
	_ runner.Executor = (*slurm)(nil)
	_ runner.Remoter  = (*slurm)(nil)
)

func newSlurm(cfg Config, boot string, tasks func(*store.Leaderboard) (*problems.Task, error), log *slog.Logger) *slurm {
	s := &slurm{cfg: cfg.Slurm, boot: boot, runs: newNodeRuns(), tasks: tasks, log: log,
		profilesDir: profilesDir(cfg.DataDir), maxReport: int64(cfg.Profiler.MaxReport)}
	s.setName(cfg.Slurm.Coordinator)
	s.board = newJobBoard(s.squeue, cfg.Slurm.Poll/2)
	s.reach = newControllerReach(log)
	return s
}

// maxNodeResult bounds a node's report: the run's output and its Nsight
// Compute report, base64 in JSON.
func maxNodeResult(maxReport int64) int64 { return maxReport*4/3 + 64<<20 }

// execute hands the run to Slurm and waits for the node's report, for the
// job to end without one (the box's failure: the runner tries again), or
// for ctx to end (the lease lost, or shutdown: the job is cancelled).
func (s *slurm) Execute(ctx context.Context, g runner.Gang, rc *store.RunContext, _ func(context.Context) error) (*runner.Execution, error) {
	job, err := s.nodeJob(g, rc)
	if err != nil {
		return nil, err
	}
	token := randomHex(24)
	nr := s.runs.add(job, token)
	defer s.runs.remove(nr)
	var out *spoolOut // the attempt's directory, with a shared directory
	if s.spool != "" {
		if out, err = publishSpool(s.spool, token, job, maxNodeResult(s.maxReport)); err != nil {
			return nil, err
		}
		defer out.remove()
	}
	id, err := s.submitPatiently(ctx, g, rc, token)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		s.cancel(s.log.With(logRun, rc.Run.ID, logSlurmJob, id), id)
		return nil, ctx.Err()
	}
	defer s.board.watch(id)()
	log := s.log.With(logRun, rc.Run.ID, logSlurmJob, id)
	log.Info("submitted to Slurm", "gpu", g[0].GPUType, "gpus", len(g))
	s.tell(g, "Slurm job "+id+" submitted")
	defer s.tell(g, "")
	res, err := s.wait(ctx, log, id, nr, out, func(st slurmJob) {
		where := "Slurm job " + id + " " + st.state
		if st.node != "" {
			where += " on " + st.node
		} else if st.reason != "" && st.reason != "None" {
			where += " (" + st.reason + ")"
		}
		s.tell(g, where)
	})
	if to := (*jobTimedOut)(nil); errors.As(err, &to) {
		log.Info("the run went past Slurm's time limit: its verdict is timed out", "limit", s.cfg.TimeLimit)
		return s.timedOut(rc.Run.Mode, to), nil
	}
	if err != nil {
		s.cancel(log, id) // cancelled, shut down or stuck; an ended job ignores it
		return nil, err
	}
	if res.Error != "" {
		return nil, fmt.Errorf("job %s in Slurm: the node could not run it: %s", id, res.Error)
	}
	return s.execution(rc.Run.ID, id, res)
}

// submitBackoff is how long a failed sbatch holds its run before the
// failure counts as an attempt (five polls, 10 s by default), and the
// first wait of a run held through an outage (slurmreach.go).
func (s *slurm) submitBackoff() time.Duration { return 5 * s.cfg.Poll }

// nodeJob is the run as the node gets it: everything it needs, the
// problem's files included, since a node shares no disk with the
// coordinator.
func (s *slurm) nodeJob(g runner.Gang, rc *store.RunContext) (api.NodeJob, error) {
	t, err := s.tasks(rc.Leaderboard)
	if err != nil {
		return api.NodeJob{}, err
	}
	files := map[string][]byte{}
	for _, p := range append([]string{"task.yml"}, t.Sources()...) {
		data, err := os.ReadFile(filepath.Join(t.Dir, filepath.FromSlash(p)))
		if err != nil {
			return api.NodeJob{}, fmt.Errorf("problem of leaderboard %s: %w", rc.Leaderboard.Name, err)
		}
		files[p] = data
	}
	sha := rc.Leaderboard.ProblemSHA // runTask checked the files against it
	if sha == "" {
		if sha, err = t.Fingerprint(); err != nil {
			return api.NodeJob{}, err
		}
	}
	j := api.NodeJob{Run: rc.Run.ID, Submission: rc.Submission.ID, User: rc.Submission.User, UserID: rc.Submission.UserID(),
		Mode: rc.Run.Mode, Secret: rc.Run.Secret, GPUType: g[0].GPUType, GPUs: len(g), FileName: rc.Submission.FileName,
		Code: rc.Code, Leaderboard: rc.Leaderboard.Name, Problem: files, ProblemSHA: sha, CheckEvery: 5 * s.cfg.Poll}
	if rc.Run.Secret {
		seed := rc.Leaderboard.SecretSeed
		j.Seed = &seed
	}
	return j, nil
}

// submit runs sbatch, the batch script on its stdin (the job token must
// not show in any process's arguments), and returns the job id.
func (s *slurm) submit(ctx context.Context, g runner.Gang, rc *store.RunContext, token string) (string, error) {
	pool, ok := s.cfg.pool(g[0].GPUType)
	if !ok {
		return "", fmt.Errorf("no Slurm pool for GPU type %s", g[0].GPUType)
	}
	args := []string{"--parsable", "--job-name=" + slurmJobName, fmt.Sprintf("--comment=%s%s:%d", s.commentPrefix(), s.boot, rc.Run.ID),
		"--nodes=1", "--ntasks=1", "--no-requeue", "--chdir=/", "--output=" + s.cfg.Output,
		fmt.Sprintf("--time=%d", int(s.cfg.TimeLimit.Round(time.Minute)/time.Minute))}
	if s.cfg.Partition != "" {
		args = append(args, "--partition="+s.cfg.Partition)
	}
	if pool.GRES != "" {
		args = append(args, fmt.Sprintf("--gres=gpu:%s:%d", pool.GRES, len(g)))
	}
	if rc.Run.Mode == string(problems.ModeLeaderboard) {
		// A ranked run has the node to itself: no other job's kernels,
		// copies or heat beside its timings.
		args = append(args, "--exclusive")
	}
	args = append(args, s.cfg.Args...)
	out, err := s.slurmCmd(ctx, "sbatch", bytes.NewReader(s.script(rc.Run.ID, token)), args...)
	if err != nil {
		return "", fmt.Errorf("submit run %d: %w", rc.Run.ID, err)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";") // "id;cluster" on a federation
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("sbatch run %d: no job id in its answer %q", rc.Run.ID, out)
	}
	return id, nil
}

// script is the batch script: the node side with a clean environment,
// given what Slurm says of the job's GPUs. The token reaches it on file
// descriptor 3 (a here-document): never in an argument, where any user
// of the node could read it in /proc, and not in the environment.
func (s *slurm) script(runID int64, token string) []byte {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# kernelbox: one run, reported to the coordinator\n")
	fmt.Fprintf(&b, "exec 3<<'KERNELBOX_TOKEN'\n%s\nKERNELBOX_TOKEN\n", token)
	b.WriteString("exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\\n")
	for _, v := range []string{"SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURMD_NODENAME", "CUDA_VISIBLE_DEVICES"} {
		fmt.Fprintf(&b, "  %s=\"$%s\" \\\n", v, v)
	}
	argv := append(append([]string{}, s.cfg.Command...), "node", "run-job")
	if s.spool != "" {
		argv = append(argv, "--shared-dir", s.spool)
	} else {
		argv = append(argv, "--coordinator", s.cfg.Coordinator)
	}
	argv = append(argv, "--run", strconv.FormatInt(runID, 10), "--token-fd", "3")
	if s.cfg.NodeConfig != "" {
		argv = append(argv, "--config", s.cfg.NodeConfig)
	}
	b.WriteString(" ")
	for _, a := range argv {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return []byte(b.String())
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// wait waits for the node's report. Slurm is asked every poll how the job
// stands: a job that ended without a report (its node failed, it was
// preempted or cancelled by someone else) is the box's failure; one that
// went past its time limit is the run's own timeout (jobTimedOut).
func (s *slurm) wait(ctx context.Context, log *slog.Logger, id string, nr *nodeRun, out *spoolOut, seen func(slurmJob)) (api.NodeResult, error) {
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	var spoolTicks <-chan time.Time
	if out != nil {
		st := time.NewTicker(spoolTick)
		defer st.Stop()
		spoolTicks = st.C
	}
	var last slurmJob
	failures := 0
	for {
		select {
		case res := <-nr.result:
			return res, nil
		case <-ctx.Done():
			return api.NodeResult{}, ctx.Err()
		case <-spoolTicks:
			if res, err := s.spoolResult(ctx, log, nr.job, out, false); err != nil || res != nil {
				return deref(res), err
			}
			continue
		case <-t.C:
		}
		st, err := s.board.state(ctx, id)
		if err != nil {
			// Slurm may be restarting; the job may well be running on. Say
			// so once a minute or so, not every poll.
			if failures%30 == 0 && ctx.Err() == nil {
				log.Warn("ask Slurm about the job", "err", err, "tries", failures+1)
			}
			failures++
			continue
		}
		failures = 0
		if st != last {
			log.Info("Slurm job", "state", st.state, "reason", st.reason, "node", st.node)
			last = st
			seen(st)
		}
		if st.alive() {
			continue
		}
		select { // the report comes before the job ends: the node waits for its answer
		case res := <-nr.result:
			return res, nil
		default:
		}
		if res, err := s.spoolResult(ctx, log, nr.job, out, true); err != nil || res != nil {
			return deref(res), err
		}
		if st.state == "TIMEOUT" {
			return api.NodeResult{}, &jobTimedOut{job: id, node: st.node}
		}
		if st.stuck() {
			return api.NodeResult{}, fmt.Errorf("job %s in Slurm is %s (%s) and would not go on by itself: given up", id, st.state, st.reason)
		}
		return api.NodeResult{}, fmt.Errorf("job %s in Slurm ended %s on %s without a report (%s; the node's own words are in slurm.output there)",
			id, st.state, nodeOrNone(st.node), st.reason)
	}
}

func deref(res *api.NodeResult) api.NodeResult {
	if res == nil {
		return api.NodeResult{}
	}
	return *res
}

// spoolResult passes on the events the node appended in the shared
// directory and returns its report once it is there (nil before, and
// always without a shared directory); final is the last look, the job
// having ended.
func (s *slurm) spoolResult(ctx context.Context, log *slog.Logger, job api.NodeJob, out *spoolOut, final bool) (*api.NodeResult, error) {
	if out == nil {
		return nil, nil
	}
	// The report first: the node appends its events before it links the
	// report, so once the report is there, so is every event.
	res, err := out.result(final)
	out.events(ctx, log, func(ctx context.Context, ev api.NodeEvent) error {
		p, err := nodeEventPayload(job, ev)
		if err != nil || p == nil {
			return err
		}
		return s.appendEvent(ctx, job.Submission, p)
	})
	return res, err
}

func nodeOrNone(node string) string {
	if node == "" {
		return "no node"
	}
	return node
}

// cancel cancels a job whose run is over here (cancelled, or the daemon
// stopping), whatever ctx says.
func (s *slurm) cancel(log *slog.Logger, id string) {
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if _, err := s.slurmCmd(ctx, "scancel", nil, id); err != nil {
		if !strings.Contains(err.Error(), "already") && !strings.Contains(err.Error(), "Invalid job id") {
			log.Warn("scancel", "err", err)
		}
		return
	}
	log.Info("cancelled in Slurm")
}

// commentPrefix starts every job's comment: kernelbox and this
// coordinator, so that two coordinators submitting as one user (a staging
// box beside the contest's) never cancel each other's jobs; the boot and
// the run follow.
func (s *slurm) commentPrefix() string { return "kernelbox:" + s.hash + ":" }

// setName names this coordinator: by its URL, or by its own id when it
// has none (startCoordinator). Its hash goes into every job's comment
// and names its part of the shared directory.
func (s *slurm) setName(name string) {
	sum := sha256.Sum256([]byte(name))
	s.hash = hex.EncodeToString(sum[:4])
	if s.cfg.SharedDir != "" {
		s.spool = spoolRoot(s.cfg.SharedDir, s.hash)
	}
}

// coordinatorID is the id kept in file, made the first time.
func coordinatorID(file string) (string, error) {
	if b, err := os.ReadFile(file); err == nil && len(bytes.TrimSpace(b)) > 0 {
		return string(bytes.TrimSpace(b)), nil
	}
	id := randomHex(16)
	err := problems.WriteFileAtomic(file, func(w io.Writer) error { _, err := io.WriteString(w, id+"\n"); return err })
	if err != nil {
		return "", fmt.Errorf("keep the coordinator's id: %w", err)
	}
	return id, nil
}

// cancelOrphans cancels the jobs an earlier boot of this coordinator left
// in Slurm: their runs went back to the queue when it stopped.
func (s *slurm) cancelOrphans(ctx context.Context) error {
	out, err := s.slurmCmd(ctx, "squeue", nil, "--noheader", "--me", "--name="+slurmJobName, "--format=%i|%k")
	if err != nil {
		return err
	}
	var stale []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		id, comment, ok := strings.Cut(line, "|")
		if ok && strings.HasPrefix(comment, s.commentPrefix()) && !strings.HasPrefix(comment, s.commentPrefix()+s.boot+":") {
			stale = append(stale, id)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	s.log.Warn("cancelling the Slurm jobs of an earlier coordinator", "jobs", strings.Join(stale, ","))
	_, err = s.slurmCmd(ctx, "scancel", nil, stale...)
	return err
}

// slurmCmd runs one of Slurm's commands and returns its output; its error
// carries what the command said.
func (s *slurm) slurmCmd(ctx context.Context, name string, stdin *bytes.Reader, args ...string) (string, error) {
	out, err := s.runSlurmCmd(ctx, name, stdin, args...)
	if ctx.Err() == nil { // a command cut short here says nothing of Slurm
		s.reach.saw(err)
	}
	return out, err
}

func (s *slurm) runSlurmCmd(ctx context.Context, name string, stdin *bytes.Reader, args ...string) (string, error) {
	ctx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	cmd := exec.CommandContext(ctx, s.cfg.Program(name), args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(errOut.String()); msg != "" {
			return out.String(), fmt.Errorf("%s: %s (%w)", name, msg, err)
		}
		if ctx.Err() != nil {
			return out.String(), fmt.Errorf("%s: no answer within a minute: %w", name, err)
		}
		return out.String(), fmt.Errorf("%s: %w", name, err)
	}
	return out.String(), nil
}

// nodeTelemetry is the GPUs' readings as a node reports them.
type nodeTelemetry struct {
	Gate      *gpu.Telemetry     `json:"gate,omitempty"`
	Run       *gpu.RunTelemetry  `json:"run,omitempty"`
	Others    []gpu.RunTelemetry `json:"others,omitempty"`
	Throttled *gpu.RunTelemetry  `json:"throttled,omitempty"`
}

// execution turns a node's report into what the runner judges and
// records, keeping its profile here.
func (s *slurm) execution(runID int64, id string, res api.NodeResult) (*runner.Execution, error) {
	if res.Report == nil {
		return nil, fmt.Errorf("job %s in Slurm: the node's report has no result", id)
	}
	ex := &runner.Execution{Report: res.Report, Wall: res.Wall, Timed: res.Timed, Info: res.System}
	if len(res.Telemetry) > 0 {
		var t nodeTelemetry
		if err := json.Unmarshal(res.Telemetry, &t); err != nil {
			return nil, fmt.Errorf("job %s in Slurm: the node's telemetry: %w", id, err)
		}
		ex.Before, ex.Tel, ex.Others, ex.Throttled = t.Gate, t.Run, t.Others, t.Throttled
	}
	if ex.Info == nil {
		ex.Info = map[string]any{}
	}
	ex.Info[logSlurmJob] = id
	if iso, ok := runner.IsolationOf(ex.Info); !ok || !iso.Sandbox {
		// Said here, where the organiser reads, not only in the node's
		// slurm.output.
		s.log.Warn("a node ran this run without the sandbox: its code had the node's rights", logRun, runID, logSlurmJob, id,
			"node", ex.Info["node"], "said", ok, "ranked", s.cfg.RankUnsandboxed)
	}
	if int64(len(res.Profile)) > s.maxReport {
		s.log.Warn("a node's Nsight Compute report is over profiler.max_report: not kept", logRun, runID, logSlurmJob, id, "bytes", len(res.Profile))
	} else if len(res.Profile) > 0 {
		if err := os.MkdirAll(s.profilesDir, 0o700); err != nil {
			return nil, err
		}
		name := runner.ProfileName(runID)
		err := problems.WriteFileAtomic(filepath.Join(s.profilesDir, name), func(w io.Writer) error {
			_, err := w.Write(res.Profile)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("keep the profile of run %d: %w", runID, err)
		}
		ex.Profile = name
	}
	return ex, nil
}
