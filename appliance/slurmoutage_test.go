package appliance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/internal/testutil"
)

// TestSlurm_ControllerOutage stops the real slurmctld of make slurm/check
// for two minutes, as an organiser restarting it would: submissions made
// meanwhile wait (the box says the executor is unreachable) and, once the
// controller is back, every one of them passes; none is failed as the
// box's error.
func TestSlurm_ControllerOutage(t *testing.T) {
	td := startCoordinator(t)
	td.loadQuick()
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := td.user("outage")
	stopController(t)
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		if out, err := exec.Command(filepath.Join(testutil.RepoRoot(), ".ci", "slurm.sh"), "startctld").CombinedOutput(); err != nil {
			t.Fatalf("restart slurmctld: %v: %s", err, out)
		}
		waitFor(t, time.Minute, func() bool { return exec.Command("sinfo", "-h").Run() == nil })
	}
	t.Cleanup(restart) // whatever fails, the next test gets its controller

	var ids []int64
	for range 3 {
		sub, err := c.Submit(t.Context(), api.SubmitRequest{Code: code, FileName: "double.py", Mode: "test"})
		if err != nil {
			t.Fatalf("submit while the controller is down: %v", err)
		}
		ids = append(ids, sub.ID)
	}
	outage := time.Now()
	waitFor(t, time.Minute, func() bool {
		code, body := readyz(t, td, "/readyz")
		return code == 503 && strings.Contains(body, "the executor is unreachable")
	})
	time.Sleep(2*time.Minute - time.Since(outage)) // the outage itself: nothing to wait on
	for _, id := range ids {
		sub, err := c.Submission(t.Context(), id, false)
		if err != nil {
			t.Fatal(err)
		}
		if api.Ended(sub.Status) {
			t.Errorf("submission %d ended during the outage: %s, %q", id, sub.Status, sub.Reason)
		}
	}
	restart()
	t.Logf("the controller was down %s", time.Since(outage).Round(time.Second))

	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			final, err := c.Wait(t.Context(), id, nil)
			if err != nil || final.Status != api.StatusDone || !final.Passed {
				t.Errorf("submission %d after the outage: %+v, %v; want done and passed", id, final, err)
			}
		}()
	}
	wg.Wait()
	waitFor(t, time.Minute, func() bool { code, _ := readyz(t, td, "/readyz"); return code == 200 })
}

// stopController stops the test cluster's slurmctld and waits for it to
// be gone.
func stopController(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("/run/slurmctld.pid")
	if err != nil {
		t.Fatalf("slurmctld's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("slurmctld's pid file: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stop slurmctld %d: %v", pid, err)
	}
	waitFor(t, 30*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
}

// TestSlurm_Unsandboxed: on the real Slurm, a node whose config turns the
// sandbox off runs the submission, which passes and is shown to its
// owner with why it is not ranked, and stays out of the ranking.
func TestSlurm_Unsandboxed(t *testing.T) {
	requireSlurm(t) // startCoordinatorWith serves the fake too: it does not ask
	td := startCoordinatorWith(t, "sandbox: false\n")
	td.loadQuick()
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := td.user("bare")
	final := passThrough(t, c, code, "leaderboard", nil)
	if final == nil {
		return
	}
	if !final.Unsandboxed || !strings.Contains(final.Unranked, "without the sandbox") {
		t.Errorf("submission from an unsandboxed node: unsandboxed %v, unranked %q; want marked and not ranked, with why", final.Unsandboxed, final.Unranked)
	}
	rk, err := c.Ranking(t.Context(), "quick", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rk.Rankings {
		if len(r.Rows) != 0 {
			t.Errorf("ranking after an unsandboxed run = %+v, want no row", r.Rows)
		}
	}
}
