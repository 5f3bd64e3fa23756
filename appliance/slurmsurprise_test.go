package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
)

// The slurm executor's surprises, on the fake Slurm (slurmfake_test.go):
// what an organiser would not guess from one box.

// A node whose config turns the sandbox off runs the contestant's code
// without it: the run says so in its system info, and ranks only where
// the coordinator's organiser allows it, marked.
func TestFakeSlurm_Unsandboxed(t *testing.T) {
	requireRootSandbox(t)
	fake := newFakeSlurm(t)
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, allow := range []bool{false, true} {
		td := startCoordinatorWith(t, "sandbox: false\n", fake.config, func(c *Config) { c.Slurm.RankUnsandboxed = allow })
		td.loadQuick()
		c, _ := td.user("bare")
		final := passThrough(t, c, code, "leaderboard", nil)
		if final == nil {
			return
		}
		var info struct {
			Isolation runner.Isolation `json:"isolation"`
		}
		if err := json.Unmarshal(final.Runs[0].SystemInfo, &info); err != nil || info.Isolation.Sandbox ||
			info.Isolation.Runtime != "none" || info.Isolation.Kernel == "" || info.Isolation.Node == "" {
			t.Errorf("rank_unsandboxed %v: the run's system info %s, want its isolation: no sandbox, runtime none, kernel, node", allow, final.Runs[0].SystemInfo)
		}
		rk, err := c.Ranking(t.Context(), "quick", "cpu")
		if err != nil {
			t.Fatal(err)
		}
		var rows []api.RankRow
		if len(rk.Rankings) == 1 {
			rows = rk.Rankings[0].Rows
		}
		switch {
		case !final.Unsandboxed:
			t.Errorf("rank_unsandboxed %v: the submission is not marked unsandboxed: %+v", allow, final.Submission)
		// The public run's reason, which names its node, whichever ran first.
		case !allow && (len(rows) != 0 || !strings.Contains(final.Unranked, "this run ran without the sandbox on node ")):
			t.Errorf("rank_unsandboxed off: ranking %+v, unranked %q; want no row, and the reason for its owner", rows, final.Unranked)
		case !allow && final.Score == nil:
			t.Errorf("rank_unsandboxed off: the owner sees no score")
		case allow && (len(rows) != 1 || !rows[0].Unsandboxed || final.Unranked != ""):
			t.Errorf("rank_unsandboxed on: ranking %+v, unranked %q; want one row marked unsandboxed", rows, final.Unranked)
		}
		if allow {
			out, _, _ := td.cli(td.token, "leaderboard", "quick")
			mustHave(t, "kernelbox leaderboard", out, "bare [no sandbox]", "[no sandbox]: ran without the sandbox")
		} else {
			out, _, _ := td.cli(td.token, "submissions", "show", strconv.FormatInt(final.ID, 10))
			mustHave(t, "kernelbox submissions show", out, "not ranked: ", "ran without the sandbox", "slurm.rank_unsandboxed is off")
		}
	}
}

// A job Slurm stops at its time limit is the submission's own timeout,
// with the limit, tried once.
func TestFakeSlurm_TimeLimit(t *testing.T) {
	requireRootSandbox(t)
	fake := newFakeSlurm(t)
	td := startCoordinatorWith(t, "", fake.config, func(c *Config) { c.Slurm.TimeLimit = 90 * time.Minute })
	td.loadQuick()
	c, _ := td.user("slowpoke")
	sub := slowSubmission(t, c, 60)
	var job string
	waitFor(t, 30*time.Second, func() bool {
		jobs := fake.jobs()
		if len(jobs) == 0 {
			return false
		}
		job = jobs[0]
		return fake.alive(job)
	})
	waitRunning(t, c, sub)
	fake.end(job, "TIMEOUT", true)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	final, err := c.Wait(ctx, sub, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := final.Runs[0]
	if final.Status != api.StatusDone || final.Passed || !strings.Contains(final.Reason, "timed out") ||
		!strings.Contains(final.Reason, "1h30m") || r.Attempts != 1 || len(fake.jobs()) != 1 {
		t.Errorf("after Slurm's time limit: status %s, passed %v, reason %q, attempts %d, jobs %v; want done, failed, timed out at 1h30m, once",
			final.Status, final.Passed, final.Reason, r.Attempts, fake.jobs())
	}
}

// With the controller out of reach, a submission waits, and the box says
// why: /readyz and /metrics. Once it answers, the run goes out, its
// first attempt.
func TestFakeSlurm_ControllerOutage(t *testing.T) {
	requireRootSandbox(t)
	fake := newFakeSlurm(t)
	td := startCoordinatorWith(t, "", fake.config)
	td.loadQuick()
	if code, body := readyz(t, td, "/readyz"); code != 200 {
		t.Fatalf("/readyz before the outage = %d %s", code, body)
	}
	fake.down(true)
	c, _ := td.user("patient")
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Submit(t.Context(), api.SubmitRequest{Code: code, FileName: "double.py", Mode: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// Past the three attempts that used to fail it.
	waitFor(t, 30*time.Second, func() bool { return fake.lines("failed") >= 4 })
	status, body := readyz(t, td, "/readyz")
	if status != 503 {
		t.Errorf("/readyz while Slurm is out of reach = %d, want 503", status)
	}
	mustHave(t, "/readyz", body, "the executor is unreachable", "Unable to contact slurm controller")
	_, metrics := readyz(t, td, "/metrics")
	mustHave(t, "/metrics", metrics, `kernelbox_executor_reachable{executor="slurm"} 0`, "kernelbox_ready 0")
	if v, err := c.Submission(t.Context(), sub.ID, false); err != nil || api.Ended(v.Status) {
		t.Fatalf("the submission during the outage: %+v, %v; want it waiting", v, err)
	}
	fake.down(false)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	final, err := c.Wait(ctx, sub.ID, nil)
	if err != nil || !final.Passed || final.Runs[0].Attempts != 1 {
		t.Fatalf("after the outage: %+v, %v; want passed on its first attempt", final, err)
	}
	if status, body := readyz(t, td, "/readyz"); status != 200 {
		t.Errorf("/readyz after the outage = %d %s", status, body)
	}
	_, metrics = readyz(t, td, "/metrics")
	mustHave(t, "/metrics", metrics, `kernelbox_executor_reachable{executor="slurm"} 1`)
}

// submitPatiently waits out an unreachable controller for slurm.patience,
// and no longer; a refusal counts at once.
func TestSlurm_SubmitPatiently(t *testing.T) {
	t.Parallel()
	fake := newFakeSlurm(t)
	cfg := DefaultConfig()
	cfg.Slurm.Coordinator = "http://coordinator.test"
	cfg.Slurm.Pools = []SlurmPool{{GPUType: "cpu", GPUs: 1}}
	fake.config(&cfg)
	cfg.Slurm.Poll = 100 * time.Millisecond
	cfg.Slurm.Patience = 2 * time.Second
	cfg.Slurm.Command = []string{"true"} // the "node" does nothing
	s := newSlurm(cfg, "boot", nil, testLogger(t))
	g := runner.Gang{{ID: "slurm:cpu:0", GPUType: "cpu"}}
	rc := &store.RunContext{Run: store.RunRecord{Run: api.Run{ID: 7, Mode: "test"}}}

	fake.down(true)
	begin := time.Now()
	_, err := s.submitPatiently(t.Context(), g, rc, "tok")
	if took := time.Since(begin); err == nil || !looksUnreachable(err) || took < 2*time.Second || took > 10*time.Second {
		t.Errorf("submitPatiently with the controller down for good = %v after %v; want its error after about the 2s patience", err, took)
	}
	if n := fake.lines("failed"); n < 3 {
		t.Errorf("sbatch tried %d times in the patience, want several", n)
	}
	if len(s.reach.reasons()) != 1 {
		t.Errorf("reach.reasons() = %q, want the outage", s.reach.reasons())
	}

	// Back within the patience: the run goes out.
	s.reach = newControllerReach(testLogger(t))
	go func() {
		time.Sleep(700 * time.Millisecond)
		fake.down(false)
	}()
	id, err := s.submitPatiently(t.Context(), g, rc, "tok")
	if err != nil || id == "" || len(s.reach.reasons()) != 0 {
		t.Errorf("submitPatiently with the controller back = %q, %v (reasons %q); want a job", id, err, s.reach.reasons())
	}

	// A refusal is an answer: no patience.
	s.cfg.Pools[0].GPUType = "H100"
	_, err = s.submitPatiently(t.Context(), g, rc, "tok")
	if err == nil || looksUnreachable(err) {
		t.Errorf("submitPatiently of a GPU type without a pool = %v, want the refusal", err)
	}
}

func TestLooksUnreachable(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]bool{
		"sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)": true,
		"slurm_load_jobs error: Socket timed out on send/recv operation":                                   true,
		"squeue: no answer within a minute: signal: killed":                                                true,
		"sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification":        false,
		"sbatch: error: Batch job submission failed: Invalid account or account/partition combination":     false,
	} {
		if got := looksUnreachable(errors.New(msg)); got != want {
			t.Errorf("looksUnreachable(%q) = %v, want %v", msg, got, want)
		}
	}
}

// A node cut off from Slurm is NODE_FAIL there while its job runs on: the
// coordinator tries the run again as a new job, and the old attempt,
// which scancel cannot reach, stops by itself once it learns that it was
// given up, rather than run on to a report no one takes.
func TestFakeSlurm_NodeFailStopsTheOldAttempt(t *testing.T) {
	requireRootSandbox(t)
	fake := newFakeSlurm(t)
	td := startCoordinatorWith(t, "", fake.config)
	td.loadQuick()
	c, _ := td.user("cutoff")
	sub := slowSubmission(t, c, 8)
	waitFor(t, 30*time.Second, func() bool { return len(fake.jobs()) == 1 && fake.alive(fake.jobs()[0]) })
	waitRunning(t, c, sub)
	first := fake.jobs()[0]
	fake.end(first, "NODE_FAIL", false) // the job's processes run on
	// The coordinator checks every five polls (1 s here).
	waitFor(t, 15*time.Second, func() bool { return !fake.alive(first) })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	final, err := c.Wait(ctx, sub, nil)
	if err != nil || !final.Passed || final.Runs[0].Attempts != 2 || len(fake.jobs()) != 2 {
		t.Fatalf("after the NODE_FAIL: %+v, %v, jobs %v; want passed on a second job", final, err, fake.jobs())
	}
	// It learns it either mid-run or, when the NODE_FAIL came before its
	// node had fetched the run (under load), at the fetch: both stop it.
	out, _ := os.ReadFile(filepath.Join(filepath.Dir(td.dir), "job-"+first+".out"))
	if !strings.Contains(string(out), "the coordinator gave this attempt up") && !strings.Contains(string(out), "(given up, or ended)") {
		t.Errorf("the old attempt's log says nothing of being given up:\n%s", out)
	}
}
