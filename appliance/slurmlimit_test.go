package appliance

import (
	"context"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
)

// On the real Slurm: a run that goes past slurm.time_limit is stopped by
// Slurm and ends as its own timeout, on its one attempt. Slurm looks at
// time limits every half minute or so, so this takes one to two minutes.
func TestSlurm_TimeLimit(t *testing.T) {
	td := startCoordinator(t, func(c *Config) { c.Slurm.TimeLimit = time.Minute })
	// The problem's own timeout must not come first.
	td.loadQuickAs("quicklong", "test_timeout: 60", "test_timeout: 600")
	c, _ := td.user("overtime")
	code := "SLEEP = 600\ndef custom_kernel(xs):\n    return [2 * x for x in xs]\n"
	s, err := c.Submit(t.Context(), api.SubmitRequest{Leaderboard: "quicklong", GPU: "cpu", Code: []byte(code), FileName: "slow.py", Mode: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sub := s.ID
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	final, err := c.Wait(ctx, sub, nil)
	if err != nil {
		t.Fatal(err)
	}
	run := final.Runs[0]
	if _, state := slurmJobOf(t, run.ID); state != "TIMEOUT" {
		t.Errorf("the run's Slurm job ended %s, want TIMEOUT", state)
	}
	if final.Status != api.StatusDone || final.Passed || !strings.Contains(final.Reason, "timed out: the run went past the Slurm time limit of 1m") ||
		run.Attempts != 1 {
		t.Errorf("past the time limit: status %s, passed %v, reason %q, attempts %d; want done, failed, timed out at 1m, once",
			final.Status, final.Passed, final.Reason, run.Attempts)
	}
}
