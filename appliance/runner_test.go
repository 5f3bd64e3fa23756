package appliance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/sandbox"
	"kernelbox/sandbox/sandboxtest"
)

// runnerBundle is a runner built from its parts, as the daemon builds it,
// over a real store and queue in a temporary SQLite file and a fake
// sandbox: no root, no seccomp, no PyTorch.
type runnerBundle struct {
	t    *testing.T
	dir  string // the data directory
	st   *store.Store
	svc  *Service
	r    *runner.Runner
	fake *sandboxtest.Runtime
	user *store.User
	// jobDone receives each time the runner is done with a job.
	jobDone chan struct{}
}

func newRunnerBundle(t *testing.T, script ...sandboxtest.Step) *runnerBundle {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "kernelbox.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := DefaultConfig()
	cfg.DataDir, cfg.LeaseTTL = dir, 2*time.Second
	svc := newService(cfg, st, st.Queue(), testLogger(t), time.Now, "boot-test")
	fake := &sandboxtest.Runtime{Script: script}
	launch := func(_ runner.Gang, mode problems.Mode) (problems.Launcher, []string) {
		return runner.NewSandboxLauncher(fake, runner.LauncherSpec{Limits: policies.ForMode(string(mode), 0)})
	}
	slots := runner.CPUSlots(1, nil)
	jobDone := make(chan struct{}, 16)
	rcfg := runnerConfig(cfg, svc.boot)
	rcfg.IdlePoll = 50 * time.Millisecond
	r := runner.New(runner.Deps{Config: rcfg, Slots: slots, Queue: svc.queue, Store: svc.store, Wake: svc.wake,
		Metrics: svc.metrics, TasksFunc: svc.runTask, ReconcileFunc: svc.reconcile, Launch: launch,
		Python: &problems.Interpreter{Path: "/usr/bin/python3", Device: "cpu"}, Log: testLogger(t),
		JobDoneFunc: func() { jobDone <- struct{}{} }})
	svc.offer(slots)
	quick, err := filepath.Abs(filepath.Join("testdata", "quick"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.loadProblemSet(ctx, quick, api.ProblemLoad{Name: "quick"}, store.LoadOptions{Source: store.SourceUpload, Replace: true}); err != nil {
		t.Fatal(err)
	}
	u, _, err := st.CreateUser(ctx, "ann", api.RoleContestant)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(time.Second) })
	return &runnerBundle{t: t, dir: dir, st: st, svc: svc, r: r, fake: fake, user: u, jobDone: jobDone}
}

// submit sends the quick problem's correct solution in test mode and
// waits for the submission to end.
func (b *runnerBundle) submit() *store.Submission {
	b.t.Helper()
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		b.t.Fatal(err)
	}
	sub, err := b.svc.Submit(b.t.Context(), b.user, api.SubmitRequest{Leaderboard: "quick", GPU: "cpu", Mode: "test", Code: code})
	if err != nil {
		b.t.Fatalf("Submit: %v", err)
	}
	var got *store.Submission
	waitFor(b.t, 20*time.Second, func() bool {
		got, err = b.st.Submission(b.t.Context(), sub.ID)
		return err == nil && api.Ended(got.Status)
	})
	return got
}

// passing is what the quick problem's harness writes for its two tests.
const passing = "test-count: 2\ntest.0.spec: n: 3; seed: 1\ntest.0.status: pass\n" +
	"test.1.spec: n: 10; seed: 2\ntest.1.status: pass\ncheck: pass\n"

// budgetOOMStep is a run whose process the kernel killed for the budget all
// runs share, not for the run's own limit.
func budgetOOMStep() sandboxtest.Step {
	st := sandboxtest.OOM()
	st.Result.OOMKilled[0].Budget = true
	return st
}

// TestRunner_SandboxOutcomes: what the sandbox makes of a run becomes the
// run's verdict; what the box could not carry out is retried, and fails
// the submission only when the attempts are spent.
func TestRunner_SandboxOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		script   []sandboxtest.Step
		status   string
		passed   bool
		reason   string
		attempts int
	}{
		{"passes", []sandboxtest.Step{sandboxtest.OK(passing)}, api.StatusDone, true, "", 1},
		{"out of memory", []sandboxtest.Step{sandboxtest.OOM()}, api.StatusDone, false,
			"ran out of memory: the kernel killed python3 (pid 4242 on the host, holding 7.0 GiB) at the run's 8.0 GiB memory limit (the run's peak: 8.0 GiB)", 1},
		{"out of the shared budget once, then passes", []sandboxtest.Step{budgetOOMStep(), sandboxtest.OK(passing)}, api.StatusDone, true, "", 2},
		{"timed out", []sandboxtest.Step{sandboxtest.Timeout()}, api.StatusDone, false, "time", 1},
		{"wrong answer", []sandboxtest.Step{sandboxtest.Exit(problems.ExitValidation,
			"test-count: 1\ntest.0.spec: n: 3; seed: 1\ntest.0.status: fail\ntest.0.error: wrong result for n=3\ncheck: fail\n", "")},
			api.StatusDone, false, "wrong result for n=3", 1},
		{"broken once, then passes", []sandboxtest.Step{sandboxtest.Broken("runc init failed"), sandboxtest.OK(passing)},
			api.StatusDone, true, "", 2},
		{"broken every time", []sandboxtest.Step{sandboxtest.Broken("runc init failed")}, api.StatusFailed, false, "runc init failed", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newRunnerBundle(t, tt.script...)
			sub := b.submit()
			if sub.Status != tt.status || sub.Passed != tt.passed || !strings.Contains(sub.Reason, tt.reason) {
				t.Errorf("submission = %s, passed %v, reason %q; want %s, passed %v, a reason with %q",
					sub.Status, sub.Passed, sub.Reason, tt.status, tt.passed, tt.reason)
			}
			if len(sub.Runs) != 1 || sub.Runs[0].Attempts != tt.attempts {
				t.Errorf("runs = %+v; want one run of %d attempts", sub.Runs, tt.attempts)
			}
			specs := b.fake.Specs()
			if len(specs) != tt.attempts || specs[0].Limits.WallTime == 0 || !specs[0].ResultPipe {
				t.Errorf("the sandbox ran %d specs (%+v); want %d, each with a wall limit and a result pipe", len(specs), specs, tt.attempts)
			}
		})
	}
}

// TestRunner_CancelStopsTheRun: a submission cancelled while its run holds
// the sandbox ends cancelled, the run's context ends, and the runner's
// goroutines (dispatcher, reaper, heartbeat) are all gone once it stops.
func TestRunner_CancelStopsTheRun(t *testing.T) {
	// Not parallel: goleak compares against the goroutines of this test
	// alone. Registered first, the check runs after every other cleanup.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	started := make(chan struct{})
	b := newRunnerBundle(t, sandboxtest.Step{Result: sandbox.Result{Verdict: sandbox.VerdictOK}, Hold: time.Minute, Started: started})
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.svc.Submit(t.Context(), b.user, api.SubmitRequest{Leaderboard: "quick", GPU: "cpu", Mode: "test", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not start")
	}
	if _, err := b.svc.Cancel(t.Context(), b.user, sub.ID); err != nil {
		t.Fatal(err)
	}
	var got *store.Submission
	waitFor(t, 20*time.Second, func() bool {
		got, err = b.st.Submission(t.Context(), sub.ID)
		return err == nil && api.Ended(got.Status)
	})
	if got.Status != api.StatusCancelled {
		t.Errorf("after cancel: %s (%s), want cancelled", got.Status, got.Reason)
	}
	// The held run (a minute) ends because its heartbeat finds the lease
	// gone and stops it, well before the test's cleanup would.
	select {
	case <-b.jobDone:
	case <-time.After(3 * b.svc.cfg.LeaseTTL):
		t.Fatalf("the cancelled run still holds its slot after %v", 3*b.svc.cfg.LeaseTTL)
	}
}
