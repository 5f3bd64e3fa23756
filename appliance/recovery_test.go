package appliance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
	"kernelbox/internal/testutil"
	"kernelbox/problems"
	"kernelbox/queue"
)

// EnvServe and EnvCLI make this test binary run `kernelbox serve` or the
// command line with the arguments after "--" (main_test.go's TestMain):
// the kill -9 test needs the daemon in a process of its own, and runCLI
// runs each command in one, as a user would. They are exported for the
// external test package that holds TestMain.
const (
	EnvServe = "KERNELBOX_TEST_SERVE"
	EnvCLI   = "KERNELBOX_TEST_CLI"
)

// daemonProcess is `kernelbox serve` in a child process.
type daemonProcess struct {
	cmd    *exec.Cmd
	server string
	done   chan struct{}
}

// adminOf is an API client of the daemon process serving dir, as its
// admin (the token it wrote there).
func (p *daemonProcess) adminOf(t *testing.T, dir string) *api.Client {
	t.Helper()
	token, err := os.ReadFile(AdminTokenFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := api.NewClient(p.server, strings.TrimSpace(string(token)))
	if err != nil {
		t.Fatal(err)
	}
	return admin
}

// wantReady fails the test unless the daemon process's /readyz says 200.
func (p *daemonProcess) wantReady(t *testing.T, when string) {
	t.Helper()
	res, err := http.Get(p.server + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("/readyz %s = %d, want 200", when, res.StatusCode)
	}
}

func startDaemonProcess(t *testing.T, dir, cgroupParent string) *daemonProcess {
	t.Helper()
	return startDaemonProcessWith(t, dir, processOptions{args: []string{"--no-library", "--cgroup-parent", cgroupParent}})
}

// processOptions are what startDaemonProcessWith changes.
type processOptions struct {
	umask  string   // like "0077"; empty keeps the test's
	python string   // the harness Python; empty for the one the tests found
	conf   string   // more lines of the config file
	args   []string // more arguments of serve
}

// startDaemonProcessWith starts `kernelbox serve` in a process of its own
// as o says.
func startDaemonProcessWith(t *testing.T, dir string, o processOptions) *daemonProcess {
	t.Helper()
	it := testutil.RequireTorch(t)
	if o.python == "" {
		o.python = it.Path
	}
	// Bursts of submissions from one user: no cap on queued jobs in the way.
	conf := filepath.Join(t.TempDir(), "kernelbox.yaml")
	if err := os.WriteFile(conf, []byte("max_queued_per_user: 100000\n"+o.conf), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{os.Args[0], "-test.run=^$", "--", "--config", conf, "--data", dir, "--listen", "127.0.0.1:0",
		"--cpu-slots", "2", "--python", o.python, "--grace", "2s"}, o.args...)
	if umask := o.umask; umask != "" {
		// The shell sets the umask and execs the daemon, as systemd does
		// for a unit's UMask=.
		argv = append([]string{"/bin/sh", "-c", `umask "$0" && exec "$@"`, umask}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), EnvServe+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &daemonProcess{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), " serving on "); ok {
				addr <- strings.Fields(rest)[0]
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	select {
	case a := <-addr:
		p.server = "http://" + a
	case <-p.done:
		t.Fatal("the daemon exited before it listened")
	case <-time.After(60 * time.Second):
		t.Fatal("the daemon did not listen within 60s")
	}
	return p
}

func (p *daemonProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// TestDaemon_KillAndRestart sends bursts of submissions at once and kills
// the daemon with SIGKILL while their jobs run, three times, starting it
// again on the same data directory each time, and checks that every
// accepted submission finishes, each run exactly once.
func TestDaemon_KillAndRestart(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	dir := t.TempDir()
	parent := testCgroupParent(t)
	// A daemon killed with SIGKILL leaves its sandbox tmpfs mounted; the
	// next one takes it over and unmounts it when it stops (checked below).
	// Should that fail, the temporary directory must still go.
	t.Cleanup(func() { _ = syscall.Unmount(filepath.Join(dir, "sandbox"), syscall.MNT_DETACH) })
	p := startDaemonProcess(t, dir, parent)
	admin := p.adminOf(t, dir)
	ctx := t.Context()
	var archive strings.Builder
	if err := api.PackProblemSet(&archive, filepath.Join("testdata", "quick")); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.LoadProblems(ctx, strings.NewReader(archive.String()), api.ProblemLoad{Name: "quick"}); err != nil {
		t.Fatal(err)
	}
	slow, err := os.ReadFile(filepath.Join("testdata", "submissions", "slow.py"))
	if err != nil {
		t.Fatal(err)
	}
	fast, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	// Three rounds: a burst of submissions sent at once, then SIGKILL
	// while slow runs are in their sandboxes, then a new daemon.
	var ids []int64
	for round := range 3 {
		burst := make([]int64, 8)
		var wg sync.WaitGroup
		errs := make(chan error, len(burst))
		for i := range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, mode := fast, "leaderboard"
				if i%2 == 0 {
					code, mode = slow, "test"
				}
				sub, err := admin.Submit(ctx, api.SubmitRequest{Code: code, Mode: mode})
				if err != nil {
					errs <- err
					return
				}
				burst[i] = sub.ID
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: submit: %v", round, err)
		}
		ids = append(ids, burst...)
		// This burst's first (slow) run in its sandbox: each kill hits
		// another job, so none uses up its retries (three infrastructure
		// failures fail a job: a submission that kills the daemon every
		// time must not take the box down for ever).
		waitFor(t, 2*time.Minute, func() bool {
			s, err := admin.Submission(ctx, burst[0], false)
			return err == nil && s.Status == api.StatusRunning
		})
		p.kill()
		p = startDaemonProcess(t, dir, parent)
		admin = p.adminOf(t, dir)
	}
	p2, admin2 := p, admin
	for _, id := range ids {
		waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		v, err := admin2.Wait(waitCtx, id, nil)
		cancel()
		if err != nil {
			// Show where the daemon is stuck: SIGQUIT makes the Go runtime
			// print every goroutine to its stderr, which is this test's log.
			_ = p2.cmd.Process.Signal(syscall.SIGQUIT)
			<-p2.done
			t.Fatalf("Wait(%d) after the restart: %v (the daemon's goroutines are in the log above)", id, err)
		}
		if v.Status != api.StatusDone || !v.Passed {
			t.Errorf("submission %d after the restart: status %s, passed %v, reason %q; want done and passed", id, v.Status, v.Passed, v.Reason)
		}
		for _, r := range v.Runs {
			if r.Status != api.StatusDone {
				t.Errorf("submission %d run %d: %s, want done", id, r.ID, r.Status)
			}
		}
	}
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p2.done
	if mi, err := os.ReadFile("/proc/thread-self/mountinfo"); err == nil && strings.Contains(string(mi), filepath.Join(dir, "sandbox")+" ") {
		t.Errorf("the restarted daemon stopped and left the sandbox tmpfs of the killed one mounted")
	}

	// Exactly once: one stored result per run, and one succeeded job each.
	st, err := store.Open(ctx, filepath.Join(dir, "kernelbox.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	finished := map[int64]int{}
	for _, id := range ids {
		evs, err := st.SubmissionEvents(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Kind == "run.finished" {
				var d struct {
					Run int64 `json:"run"`
				}
				_ = json.Unmarshal(ev.Data, &d)
				finished[d.Run]++
			}
		}
	}
	q := st.Queue() // the jobs share the store's file
	runs, rerun := 0, 0
	for _, id := range ids {
		sub, err := st.Submission(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sub.Runs {
			runs++
			if r.Attempts > 1 {
				rerun++
			}
			if finished[r.ID] != 1 {
				t.Errorf("run %d of submission %d has %d results, want exactly 1", r.ID, id, finished[r.ID])
			}
			j, err := q.Get(ctx, r.JobID)
			if err != nil || j.State != queue.Succeeded {
				t.Errorf("job %d of run %d: %+v, %v; want succeeded", r.JobID, r.ID, j, err)
			}
		}
	}
	if rerun == 0 {
		t.Errorf("no run was started twice: the kill hit no running job, so the test proved nothing")
	}
	if runs != 36 { // each round: 4 leaderboard submissions with their twins, 4 test ones
		t.Errorf("runs = %d, want 36", runs)
	}
}

// TestDaemon_ManyUsers pushes 200 submissions from 20 users at once through
// the API: none is lost, every one passes, and the queue interleaves the
// users instead of serving them in arrival order.
func TestDaemon_ManyUsers(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	const users, each = 20, 10
	ctx := t.Context()
	clients := make([]*api.Client, users)
	for i := range clients {
		clients[i], _ = td.user(fmt.Sprintf("user%02d", i))
	}
	var mu sync.Mutex
	ids := map[int64]string{}
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				sub, err := c.Submit(ctx, api.SubmitRequest{Code: code, Mode: "test"})
				if err != nil {
					t.Errorf("user%02d: Submit: %v", i, err)
					return
				}
				mu.Lock()
				ids[sub.ID] = sub.User
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	accepted := time.Since(start)
	if len(ids) != users*each {
		t.Fatalf("accepted %d submissions, want %d", len(ids), users*each)
	}
	type started struct {
		at   time.Time
		user string
	}
	// Every submission has its own watcher, all at once: long-polls sleep
	// on one broadcast, so none is refused or starves the others.
	var order []started
	for id, user := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := td.admin.Wait(ctx, id, nil)
			if err != nil {
				t.Errorf("Wait(%d): %v", id, err)
				return
			}
			if v.Status != api.StatusDone || !v.Passed || len(v.Runs) != 1 {
				t.Errorf("submission %d: %s, passed %v, %d runs; want done, passed, 1 run", id, v.Status, v.Passed, len(v.Runs))
				return
			}
			mu.Lock()
			order = append(order, started{v.Runs[0].Started, user})
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if left := td.d.store.Watchers(); left != 0 {
		t.Errorf("%d submissions still have a wake-up channel after every watcher left", left)
	}
	t.Logf("200 submissions accepted in %v (%.0f/s), all done in %v", accepted, float64(len(ids))/accepted.Seconds(), time.Since(start))
	// Fair share: among the first 40 runs to start (two per user if it were
	// perfectly even), every user has at least one.
	slices.SortFunc(order, func(a, b started) int { return a.at.Compare(b.at) })
	seen := map[string]bool{}
	for _, s := range order[:40] {
		seen[s.user] = true
	}
	if len(seen) != users {
		t.Errorf("the first 40 runs went to %d of the %d users, want all of them", len(seen), users)
	}
}

// TestDaemon_GracefulStop stops the daemon while a job runs past the grace
// period: the job goes back to the queue without spending an attempt, and
// the next daemon finishes it.
func TestDaemon_GracefulStop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	td := startDaemon(t, dir, func(c *Config) { c.Grace = 200 * time.Millisecond })
	td.loadQuick()
	ctx := t.Context()
	slow, err := os.ReadFile(filepath.Join("testdata", "submissions", "slow.py"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := td.admin.Submit(ctx, api.SubmitRequest{Code: slow, Mode: "test"})
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, td.admin, sub.ID)
	// A watcher is in a long-poll when the stop comes: it must not hold the
	// shutdown for its 30 seconds.
	page, err := td.admin.Events(ctx, sub.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan error, 1)
	go func() {
		_, err := td.admin.Events(ctx, sub.ID, page.Next, 30*time.Second)
		polled <- err
	}()
	waitFor(t, 10*time.Second, func() bool { // until the long-poll waits
		return td.d.store.Watching(sub.ID)
	})
	begin := time.Now()
	td.stop()
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("Stop took %v with a grace of 200ms and one watcher", took)
	}
	if err := <-polled; err != nil {
		t.Errorf("the watcher's long-poll during the stop: %v", err)
	}
	st, err := store.Open(ctx, filepath.Join(dir, "kernelbox.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := st.Queue().Get(ctx, sub.Runs[0].JobID)
	st.Close()
	if err != nil || j.State != queue.Queued || j.Attempts != 0 {
		t.Fatalf("job after a stop past the grace period: %+v, %v; want queued with no attempt spent", j, err)
	}

	td2 := startDaemon(t, dir, nil)
	v, err := td2.admin.Wait(ctx, sub.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != api.StatusDone || !v.Passed {
		t.Errorf("after the restart: %s, passed %v (%s); want done and passed", v.Status, v.Passed, v.Reason)
	}
}

// flakyLauncher fails the first n launches as an infrastructure failure
// (the sandbox could not start), then runs the harness for real.
type flakyLauncher struct {
	mu    sync.Mutex
	fails int
	real  problems.Launcher
}

func (f *flakyLauncher) Launch(ctx context.Context, l problems.Launch) (problems.Outcome, error) {
	f.mu.Lock()
	fail := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if fail {
		return problems.Outcome{}, errors.New("sandbox: container init failed (scripted)")
	}
	return f.real.Launch(ctx, l)
}

// TestDaemon_InfrastructureRetries: a run the box fails to start is retried,
// up to its attempts; after that the submission is "failed" (the box's
// fault, exit 5), never a wrong answer.
func TestDaemon_InfrastructureRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		fails     int
		wantState string
		wantExit  int
	}{
		{"recovers", 1, api.StatusDone, api.ExitOK},
		{"gives up", 100, api.StatusFailed, api.ExitServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fl := &flakyLauncher{fails: tc.fails, real: problems.ExecLauncher{}}
			td := startDaemonWith(t, t.TempDir(), func(c *Config) { c.CPUSlots = 1 }, func(d *Daemon) {
				d.launch = func(runner.Gang, problems.Mode) (problems.Launcher, []string) {
					return fl, runner.SandboxEnv(d.Python.BinDir)
				}
			})
			td.loadQuick()
			out, errOut, code := td.cli(td.token, "submit", quickSolution("correct/double.py"), "--json")
			var res api.SubmitResult
			_ = json.Unmarshal([]byte(out), &res)
			if code != tc.wantExit || res.Status != tc.wantState {
				t.Fatalf("submit = exit %d, status %q (%s%s); want exit %d, %s", code, res.Status, out, errOut, tc.wantExit, tc.wantState)
			}
			v, err := td.admin.Submission(t.Context(), res.ID, false)
			if err != nil {
				t.Fatal(err)
			}
			wantAttempts := min(tc.fails+1, 3)
			if v.Runs[0].Attempts != wantAttempts {
				t.Errorf("run attempts = %d, want %d", v.Runs[0].Attempts, wantAttempts)
			}
			if tc.wantState == api.StatusFailed && !strings.Contains(v.Reason, "could not run it (3 attempts)") {
				t.Errorf("reason = %q, want the box's failure after 3 attempts", v.Reason)
			}
		})
	}
}

// TestDaemon_StopLeavesNoGoroutines: a daemon that served a submission
// and stopped leaves none of its goroutines behind (the listeners, the
// dispatchers and reaper, the heartbeat, the long-poll, the sandbox's
// pipe copies). Not parallel: goleak compares against this test's start.
func TestDaemon_StopLeavesNoGoroutines(t *testing.T) {
	requireRootSandbox(t)
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) }) // first registered, so it runs last
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := td.admin.Submit(t.Context(), api.SubmitRequest{Leaderboard: "quick", GPU: "cpu", Mode: "test", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := td.admin.Wait(t.Context(), sub.ID, nil); err != nil || !v.Passed {
		t.Fatalf("submission = %+v, %v; want passed", v, err)
	}
	td.stop()
	td.admin.Close()
}

// TestDaemon_DrainSurvivesRestart: a GPU an operator drained stays
// drained, with the reason given, after the daemon restarts, until it is
// undrained (issue 18: a manual drain was forgotten at restart).
func TestDaemon_DrainSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cpu2 := func(c *Config) { c.CPUSlots = 2 }
	td := startDaemon(t, dir, cpu2)
	ctx := t.Context()
	st, err := td.admin.GPUs(ctx)
	if err != nil || len(st.Slots) != 2 {
		t.Fatalf("GPUs = %+v, %v; want 2 slots", st, err)
	}
	slot := st.Slots[1].ID
	if _, err := td.admin.Drain(ctx, slot, "fan noise, look at it"); err != nil {
		t.Fatal(err)
	}
	state := func(td *testDaemon) api.SlotState {
		t.Helper()
		st, err := td.admin.GPUs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Slots {
			if s.ID == slot {
				return s
			}
		}
		t.Fatalf("no slot %s after the restart: %+v", slot, st.Slots)
		return api.SlotState{}
	}
	td.stop()
	td = startDaemon(t, dir, cpu2)
	if s := state(td); s.State != "drained" || s.Drained != "fan noise, look at it" {
		t.Errorf("after a restart: %s %q, want drained with the operator's reason", s.State, s.Drained)
	}
	if _, err := td.admin.Undrain(ctx, slot); err != nil {
		t.Fatal(err)
	}
	td.stop()
	td = startDaemon(t, dir, cpu2)
	if s := state(td); s.State != "idle" {
		t.Errorf("after undrain and a restart: %s %q, want idle", s.State, s.Drained)
	}
}
