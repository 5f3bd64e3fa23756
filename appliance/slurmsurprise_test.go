package appliance

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
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
			Isolation isolation `json:"isolation"`
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
