package appliance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/queue"
)

// Attribute keys of the daemon's logs.
const (
	logSubmission = "submission"
	logRun        = "run"
	logJob        = "job"
	logUser       = "user"
)

// broadcast wakes every waiter at once: Wait returns a channel that the
// next Fire closes.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

func (b *broadcast) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) Fire() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

func runKey(runID int64) string { return fmt.Sprintf("run:%d", runID) }

// Service is the daemon's logic between the API and the runner: it checks
// and accepts submissions, answers queries, and keeps the appliance's
// store and the queue in step.
type Service struct {
	cfg    Config
	store  *store.Store
	queue  *queue.Store
	log    *slog.Logger
	now    func() time.Time
	boot   string
	wake   *broadcast // fired when jobs are enqueued
	health []string   // why the box cannot take submissions; empty when it can
	// draining is set at shutdown: submissions are refused from then on.
	draining atomic.Bool

	// marks is the data directory's record of the ids handed out.
	marks *storeMarks
	// canary is each GPU type's last canary run (canary.go), for health.
	canary *runner.Canaries

	// board is the runner's slots, once it runs (GET /api/gpus, drains).
	board slotBoard

	metrics *metrics
	// nodeRuns are the runs out on Slurm nodes (the slurm executor), whose
	// reports the node API takes; nil with the local executor.
	nodeRuns *nodeRuns
	// executorTrouble, when set, says why the executor cannot carry runs
	// out now (Slurm's controller out of reach), for health.
	executorTrouble func() []string

	mu    sync.Mutex
	slots map[string]int // GPU type -> slots the runner serves
	tasks map[string]*problems.Task
}

func newService(cfg Config, st *store.Store, q *queue.Store, log *slog.Logger, now func() time.Time, boot string) *Service {
	return &Service{cfg: cfg, store: st, queue: q, log: log, now: now, boot: boot, wake: newBroadcast(), metrics: newMetrics(),
		slots: map[string]int{}, tasks: map[string]*problems.Task{}}
}

// task loads (and caches) a leaderboard's problem.
func (s *Service) task(lb *store.Leaderboard) (*problems.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := s.problemDir(lb)
	if t, ok := s.tasks[dir]; ok {
		return t, nil
	}
	t, err := problems.LoadTask(dir)
	if err != nil {
		return nil, fmt.Errorf("leaderboard %s: %w", lb.Name, err)
	}
	s.tasks[dir] = t
	return t, nil
}

// Submit checks a submission against every rule, stores it and enqueues its
// jobs. The order of checks is the order a contestant can fix them in: the
// box, the file, the leaderboard, the GPU and problem, the limits, the
// scanner.
func (s *Service) Submit(ctx context.Context, u *store.User, req api.SubmitRequest) (*store.Submission, error) {
	if err := s.acceptsFrom(u); err != nil {
		return nil, err
	}
	dir, mode, err := s.checkFile(req)
	if err != nil {
		return nil, err
	}
	lbName := req.Leaderboard
	if lbName == "" {
		lbName = dir.Leaderboard
	}
	if lbName == "" {
		return nil, api.Errorf(api.CodeInvalid, "no leaderboard: pass --leaderboard or put `#!POPCORN leaderboard NAME` in the file")
	}
	disagree := api.Errorf(api.CodeInvalid, "the file's #!POPCORN leaderboard is %s but the submission is for %s (--leaderboard, or the form's choice): make them agree", dir.Leaderboard, lbName)
	lb, err := s.openLeaderboard(ctx, u, lbName)
	if err != nil {
		if api.ErrorCode(err) == api.CodeNotFound && dir.Leaderboard != "" && dir.Leaderboard != lbName {
			return nil, disagree
		}
		return nil, err
	}
	if dir.Leaderboard != "" && !answersTo(lb, dir.Leaderboard) {
		return nil, disagree
	}
	gpu, err := s.pickGPU(lb, req.GPU, dir.GPUs)
	if err != nil {
		return nil, err
	}
	t, err := s.task(lb)
	if err != nil {
		return nil, err
	}
	gpus := gangSize(t, gpu)
	if have := s.slotCount(gpu); gpus > have {
		return nil, api.Errorf(api.CodeUnavailable, "leaderboard %s is a multi-GPU problem that needs %d %s at once (its largest world_size), and this box has %d",
			lb.Name, gpus, gpu, have)
	}
	want := t.SubmissionFile()
	if req.FileName == "" {
		req.FileName = "submission" + filepath.Ext(want)
	}
	if err := checkFileName(req.FileName); err != nil {
		return nil, err
	}
	scanned := req.Code
	if problems.IsArchive(req.FileName) {
		files, err := problems.UnpackArchive(req.Code, req.FileName)
		if err == nil {
			err = t.CheckArchive(files)
		}
		if err != nil {
			return nil, api.Errorf(api.CodeInvalid, "%s: %v", req.FileName, err)
		}
		scanned = archiveSources(files)
	} else if filepath.Ext(req.FileName) != filepath.Ext(want) {
		return nil, api.Errorf(api.CodeInvalid, "leaderboard %s takes a %s file or an archive (.zip, .tar.gz) holding it, got %s", lb.Name, filepath.Ext(want), req.FileName)
	}
	category := api.CategoryRanked
	if mode == problems.ModeTest {
		category = api.CategoryTest
	}
	findings, err := s.scan(u, lb, mode, scanned)
	if err != nil {
		s.metrics.refusal(err, true)
		return nil, err
	}
	sub, err := s.store.CreateSubmission(ctx, store.NewSubmission{Leaderboard: lb, User: u, FileName: filepath.Base(req.FileName),
		Code: req.Code, GPUType: gpu, Mode: string(mode), Category: category, Language: problems.Language(req.FileName, req.Code),
		Secret: mode == problems.ModeLeaderboard && t.NeedsTwin(), Findings: findings,
		Jobs: runJobs(u.Name, category, gpus), Limits: s.limits(lb, u, category)})
	if err != nil {
		s.metrics.refusal(err, false)
		return nil, err
	}
	s.metrics.accepted.WithLabelValues(gpu, string(mode)).Inc()
	if err := s.marks.note(sub.ID, sub.Runs[len(sub.Runs)-1].ID); err != nil {
		// Stored all the same: only a later loss of it would go unseen.
		s.log.Error("the data directory's record of the store", "err", err)
	}
	s.wake.Fire()
	s.log.Info("submission accepted", logSubmission, sub.ID, logUser, u.Name, "leaderboard", lb.Name, "gpu", gpu, "mode", mode)
	return sub, nil
}

// archiveSources is what the scanner reads of an archive: every file,
// one after another (a binary one is read as it is: its patterns will
// rarely match, and it runs only if the text imports it).
func archiveSources(files []problems.ArchiveFile) []byte {
	var b bytes.Buffer
	for _, f := range files {
		b.Write(f.Data)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// maxFileName bounds a submission's file name (a file system's own limit).
const maxFileName = 255

// checkFileName refuses a file name that no file could have: one that is
// too long, or holds a NUL or another control character (the name is
// shown in listings and logs, and written into the run's directory).
func checkFileName(name string) error {
	if len(name) > maxFileName {
		return api.Errorf(api.CodeInvalid, "the file name is %d bytes long; at most %d", len(name), maxFileName)
	}
	if !utf8.ValidString(name) {
		return api.Errorf(api.CodeInvalid, "the file name is not UTF-8")
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return api.Errorf(api.CodeInvalid, "the file name holds the control character %U", r)
		}
	}
	return nil
}

// acceptsFrom says whether the box takes submissions now, and from u.
func (s *Service) acceptsFrom(u *store.User) error {
	switch {
	case s.draining.Load():
		return api.Errorf(api.CodeUnavailable, "the box is shutting down; submit again when it is back")
	case len(s.health) > 0:
		return api.Errorf(api.CodeUnavailable, "this box cannot evaluate submissions now: %s", strings.Join(s.health, "; "))
	case u.Banned:
		return api.Errorf(api.CodeForbidden, "user %s is banned from submitting", u.Name)
	}
	if disk := s.diskProblem(); disk != "" {
		s.log.Error("submission refused: the disk is nearly full", "why", disk)
		return api.Errorf(api.CodeStorageFull, "the box cannot store submissions now: %s", disk)
	}
	return nil
}

// checkFile reads the upload: its size, its text, its directives and the
// mode asked for.
func (s *Service) checkFile(req api.SubmitRequest) (problems.Directives, problems.Mode, error) {
	var none problems.Directives
	switch {
	case int64(len(req.Code)) > s.cfg.MaxUploadBytes:
		return none, "", api.Errorf(api.CodeTooLarge, "the file is %d bytes, more than the %d allowed", len(req.Code), s.cfg.MaxUploadBytes)
	case len(req.Code) == 0:
		return none, "", api.Errorf(api.CodeInvalid, "the file is empty")
	}
	mode, err := problems.ParseMode(req.Mode)
	if err != nil {
		return none, "", api.Errorf(api.CodeInvalid, "%v", err)
	}
	if problems.IsArchive(req.FileName) {
		return none, mode, nil // no directives: the leaderboard comes from the request (CheckArchive reads the rest)
	}
	if !utf8.Valid(req.Code) {
		return none, "", api.Errorf(api.CodeInvalid, "the file is not UTF-8 text")
	}
	dir, err := problems.ParseDirectives(req.Code)
	if err != nil {
		return none, "", api.Errorf(api.CodeInvalid, "%v", err)
	}
	return dir, mode, nil
}

// openLeaderboard finds the leaderboard and checks that u may submit to
// it: a member of a closed one, before its deadline (staff always).
func (s *Service) openLeaderboard(ctx context.Context, u *store.User, name string) (*store.Leaderboard, error) {
	lb, err := s.readLeaderboard(ctx, u, name)
	if err != nil || u.Role.Staff() {
		return lb, err
	}
	if lb.Ended(s.now()) {
		return nil, api.Errorf(api.CodeForbidden, "leaderboard %s closed at its deadline, %s", lb.Name, lb.Deadline.Format(time.RFC3339))
	}
	return lb, nil
}

// limits are what u's submission to lb in category is held to, checked
// where it is stored (store.Limits): the leaderboard's hourly rate limit,
// else the box's, never for staff; the box's cap on waiting jobs for
// everyone.
func (s *Service) limits(lb *store.Leaderboard, u *store.User, category string) store.Limits {
	l := store.Limits{MaxQueued: s.cfg.MaxQueuedPerUser, RateSince: s.now().Add(-time.Hour)}
	if !u.Role.Staff() {
		rate, ok := lb.RateLimits[category]
		if !ok {
			rate = s.cfg.RateLimits[category]
		}
		l.Rate = rate
	}
	return l
}

// scan runs the scanner over a timed submission (test mode ranks nothing):
// a refusal is an error, flags are returned to be stored with it.
func (s *Service) scan(u *store.User, lb *store.Leaderboard, mode problems.Mode, code []byte) ([]policies.Finding, error) {
	if mode == problems.ModeTest {
		return nil, nil
	}
	findings := policies.Scan(code)
	if policies.Worst(findings) != policies.ScanReject {
		return findings, nil
	}
	var why []string
	for _, f := range findings {
		if f.Verdict == policies.ScanReject {
			why = append(why, f.String())
		}
	}
	s.log.Info("submission refused by the scanner", logUser, u.Name, "leaderboard", lb.Name, "rules", len(why))
	return nil, api.Errorf(api.CodeForbidden, "the scanner refuses this submission: %s", strings.Join(why, "; "))
}

// pickGPU resolves the GPU type: the flag, else the directive's first one
// the box serves, else the only type both the leaderboard and the box have.
func (s *Service) pickGPU(lb *store.Leaderboard, flag string, directive []string) (string, error) {
	served := s.gpuTypes()
	var both []string
	for _, g := range lb.GPUs {
		if slices.Contains(served, g) {
			both = append(both, g)
		}
	}
	gpu := flag
	if gpu == "" && len(directive) > 0 {
		for _, g := range directive {
			if slices.Contains(both, g) {
				gpu = g
				break
			}
		}
		// A file that asks for an H100 is not run on a CPU instead: the
		// directive is refused as the flag would be (issue 19).
		if gpu == "" {
			return "", api.Errorf(api.CodeInvalid, "the file's #!POPCORN gpu asks for %s; leaderboard %s runs here on %s: change the directive or pass --gpu",
				strings.Join(directive, ", "), lb.Name, orNothing(both))
		}
	}
	if gpu == "" {
		if len(both) == 1 {
			return both[0], nil
		}
		if len(both) == 0 {
			return "", api.Errorf(api.CodeUnavailable, "leaderboard %s ranks on %s, and this box has none of them (it has %s)",
				lb.Name, strings.Join(lb.GPUs, ", "), strings.Join(served, ", "))
		}
		return "", api.Errorf(api.CodeInvalid, "pick a GPU with --gpu: leaderboard %s runs here on %s", lb.Name, strings.Join(both, ", "))
	}
	if !lb.OffersGPU(gpu) {
		return "", api.Errorf(api.CodeInvalid, "leaderboard %s does not rank on %s (it ranks on %s)", lb.Name, gpu, strings.Join(lb.GPUs, ", "))
	}
	if s.slotCount(gpu) == 0 {
		return "", api.Errorf(api.CodeUnavailable, "this box has no %s GPU (it has %s)", gpu, strings.Join(served, ", "))
	}
	return gpu, nil
}

func orNothing(ss []string) string {
	if len(ss) == 0 {
		return "nothing"
	}
	return strings.Join(ss, ", ")
}

// gangSize is how many GPUs of gpuType one run of the task takes at once:
// its largest world_size for a multi-GPU problem (CPU slots on the CPU
// backend), else 1.
func gangSize(t *problems.Task, gpuType string) int {
	dev := "cuda"
	if gpuType == "cpu" {
		dev = "cpu"
	}
	return t.WorldSize(dev)
}

// runJobs makes the queue jobs of a submission's runs, for a gang of
// gpus: each under its run's idempotent key, in its class.
func runJobs(user, category string, gpus int) store.JobsFunc {
	class := queue.ClassRanked
	if category == api.CategoryTest {
		class = queue.ClassTest
	}
	return func(subID int64, runs []api.Run) ([]queue.NewJob, error) {
		var jobs []queue.NewJob
		for _, r := range runs {
			p, err := json.Marshal(runner.Payload{Run: r.ID, Submission: subID})
			if err != nil {
				return nil, err
			}
			jobs = append(jobs, queue.NewJob{Class: class, User: user, GPUType: r.GPUType, Payload: p, Key: runKey(r.ID), GPUs: gpus})
		}
		return jobs, nil
	}
}

// reconcile brings the store and the queue back in step after a crash: a
// run without a job gets one, and a run whose job the queue gave up on
// (attempts spent, or cancelled) is ended with it.
func (s *Service) reconcile(ctx context.Context) error {
	open, err := s.store.OpenRuns(ctx)
	if err != nil {
		return err
	}
	for _, o := range open {
		if o.JobID == 0 {
			cat := api.CategoryRanked
			if o.Mode == string(problems.ModeTest) {
				cat = api.CategoryTest
			}
			rc, err := s.store.LoadRun(ctx, o.RunID)
			if err != nil {
				return fmt.Errorf("reconcile run %d: %w", o.RunID, err)
			}
			gpus := 1
			if t, err := s.task(rc.Leaderboard); err == nil {
				gpus = gangSize(t, o.GPUType)
			} else {
				// The run fails when it starts, saying why; it must not hold up the others.
				s.log.Warn("enqueue a run whose problem does not load", logRun, o.RunID, "err", err)
			}
			if err := s.store.EnqueueRuns(ctx, o.SubmissionID, []api.Run{{ID: o.RunID, GPUType: o.GPUType}}, runJobs(o.User, cat, gpus)); err != nil {
				return fmt.Errorf("reconcile run %d: %w", o.RunID, err)
			}
			s.wake.Fire()
			s.log.Warn("enqueued a run that had no job", logRun, o.RunID, logSubmission, o.SubmissionID)
			continue
		}
		j, err := s.queue.Get(ctx, o.JobID)
		if errors.Is(err, queue.ErrNotFound) {
			return fmt.Errorf("reconcile run %d: its job %d is missing from the queue database", o.RunID, o.JobID)
		}
		if err != nil {
			return fmt.Errorf("reconcile run %d: %w", o.RunID, err)
		}
		if !j.Final() {
			continue
		}
		status, reason := store.RunError, fmt.Sprintf("the box could not run it after %d attempts: %s", j.Attempts, j.Error)
		if j.State == queue.Cancelled {
			status, reason = api.StatusCancelled, "cancelled"
		}
		if err := s.store.FailRun(ctx, o.RunID, status, reason); err != nil {
			return fmt.Errorf("reconcile run %d: %w", o.RunID, err)
		}
		s.log.Warn("ended a run whose job had ended", logRun, o.RunID, logJob, j.ID, "state", j.State)
	}
	return nil
}

// Cancel cancels a queued or running submission.
func (s *Service) Cancel(ctx context.Context, u *store.User, id int64) (*store.Submission, error) {
	sub, err := s.visibleSubmission(ctx, u, id)
	if err != nil {
		return nil, err
	}
	jobs, err := s.store.CancelSubmission(ctx, sub.ID)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		// A running job's holder sees ErrLeaseLost at its next heartbeat
		// and stops the sandbox.
		if err := s.queue.Cancel(ctx, j); err != nil {
			return nil, err
		}
	}
	sub, err = s.store.Submission(ctx, id)
	if err != nil {
		return nil, err
	}
	redact(sub, u) // a secret twin that ended first must not show its cases
	return sub, nil
}

// visibleSubmission returns the submission if u may see it: its owner or staff.
func (s *Service) visibleSubmission(ctx context.Context, u *store.User, id int64) (*store.Submission, error) {
	sub, err := s.store.Submission(ctx, id)
	if err != nil {
		return nil, err
	}
	if sub.User != u.Name && !u.Role.Staff() {
		return nil, api.Errorf(api.CodeNotFound, "no submission %d", id) // not "forbidden": ids are not a secret, but their owners are
	}
	return sub, nil
}

// Queue reports depth per GPU type and where the user's jobs stand.
func (s *Service) Queue(ctx context.Context, u *store.User) (*api.QueueStatus, error) {
	depth, err := s.queue.Depth(ctx)
	if err != nil {
		return nil, err
	}
	running, err := s.queue.Running(ctx)
	if err != nil {
		return nil, err
	}
	st := &api.QueueStatus{GPUs: []api.GPUQueue{}, Mine: []api.MyJob{}}
	means := map[string]time.Duration{}
	types := s.gpuTypes()
	for g := range depth {
		if !slices.Contains(types, g) {
			types = append(types, g)
		}
	}
	sort.Strings(types)
	for _, g := range types {
		mean, err := s.queue.MeanRunTime(ctx, g, 20)
		if err != nil {
			return nil, err
		}
		means[g] = mean
		st.GPUs = append(st.GPUs, api.GPUQueue{GPUType: g, Slots: s.slotCount(g), Queued: depth[g], Running: running[g], MeanRun: mean})
	}
	open, err := s.store.OpenRuns(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range open {
		if o.User != u.Name || o.JobID == 0 {
			continue
		}
		j, err := s.queue.Get(ctx, o.JobID)
		if err != nil {
			return nil, err
		}
		mj := api.MyJob{Submission: o.SubmissionID, Run: o.RunID, GPUType: o.GPUType, State: string(j.State)}
		if pos, ok, err := s.queue.Position(ctx, j.ID, s.cfg.AgePerSecond); err != nil {
			return nil, err
		} else if ok {
			mj.Position = pos
			if n := s.slotCount(o.GPUType); n > 0 {
				// Everyone ahead, plus the runs now going, shared by the slots.
				mj.ETA = means[o.GPUType] * time.Duration(pos+running[o.GPUType]) / time.Duration(n)
			}
		}
		st.Mine = append(st.Mine, mj)
	}
	return st, nil
}
