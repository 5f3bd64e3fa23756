package appliance

import (
	"strings"
	"testing"

	"kernelbox/appliance/api"
)

// TestDaemon_HarnessFaultIsRetried: a harness that fails by its own fault
// (exit 115: the judge, the runtime or the problem's reference broke) says
// nothing about the submission. The run is tried again and ends as the
// box's failure, never as the contestant's wrong result.
func TestDaemon_HarnessFaultIsRetried(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	code := []byte("HARNESS_FAULT = True\n\n\ndef custom_kernel(xs):\n    return [2 * x for x in xs]\n")
	sub, err := td.admin.Submit(t.Context(), api.SubmitRequest{Leaderboard: "quick", Mode: "test", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	v, err := td.admin.Wait(t.Context(), sub.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Runs) != 1 {
		t.Fatalf("runs = %+v, want one", v.Runs)
	}
	if v.Passed || v.Runs[0].Attempts != 3 || !strings.Contains(v.Reason, "the harness failed, not the submission") {
		t.Errorf("a run whose harness fails = %s after %d attempts (%q); want failed after 3 attempts, blamed on the harness",
			v.Status, v.Runs[0].Attempts, v.Reason)
	}
	if strings.Contains(v.Reason, "wrong result") {
		t.Errorf("reason %q charges the contestant with a wrong result", v.Reason)
	}
}
