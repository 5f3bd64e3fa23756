package appliance

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
)

// TestCanary_PassReadies: with the sandbox on, the daemon is not ready
// until its canary has run on the CPU slots, then ready; the canary's run
// shows in health and /metrics and in no contestant's list.
func TestCanary_PassReadies(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), func(c *Config) { c.Canary = 10 * time.Minute })
	waitFor(t, 2*time.Minute, func() bool { code, _ := readyz(t, td, "/readyz"); return code == http.StatusOK })
	h, err := td.admin.Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Canaries) != 1 || h.Canaries[0].GPUType != "cpu" || !h.Canaries[0].OK || h.Canaries[0].Took <= 0 {
		t.Fatalf("health canaries = %+v, want one passed on cpu", h.Canaries)
	}
	if h.Status != "ok" {
		t.Errorf("health = %s %q after the canary passed, want ok", h.Status, h.Reasons)
	}
	_, metrics := readyz(t, td, "/metrics")
	for _, want := range []string{`kernelbox_canary_ok{gpu_type="cpu"} 1`, `kernelbox_canary_duration_seconds{gpu_type="cpu"}`, "kernelbox_ready 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	subs, err := td.admin.Submissions(t.Context(), "", true, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 0 {
		t.Errorf("submissions after the canary = %+v, want none: the canary is no contestant's", subs)
	}
	td.loadQuick()
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := td.admin.Submit(t.Context(), api.SubmitRequest{Code: code, Mode: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := td.admin.Wait(t.Context(), sub.ID, nil); err != nil || !v.Passed {
		t.Errorf("a submission after the canary passed: %+v, %v; want passed", v, err)
	}
	// The verdict is stored a moment before the queue hears the job end,
	// so a job still running just after Wait is not the canary's.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		q, err := td.admin.Queue(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var busy []api.GPUQueue
		for _, g := range q.GPUs {
			if g.Queued != 0 || g.Running != 0 {
				busy = append(busy, g)
			}
		}
		if len(busy) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue 10 s after the canary and a submission = %+v, want nothing queued or running", busy)
		}
	}
}

// TestCanary_BrokenSandbox: a harness Python the sandbox cannot see (it
// lies outside every bind) fails each run. The canary says so: /readyz
// is not ready and names the cause, /metrics reads 0, the organisers'
// page shows the banner, and submissions are still taken and queued.
func TestCanary_BrokenSandbox(t *testing.T) {
	t.Parallel()
	hidden := filepath.Join(t.TempDir(), "python3")
	// One slot: its failed canary holds the type at once (with two, the
	// other slot is tried first).
	td := startDaemonWith(t, t.TempDir(), func(c *Config) { c.Canary = 10 * time.Minute; c.CPUSlots = 1 }, func(d *Daemon) {
		if err := os.Symlink(d.Python.Path, hidden); err != nil {
			t.Fatal(err)
		}
		it := *d.Python
		it.Path = hidden // the daemon runs it; inside the sandbox it is missing
		d.Python = &it
	})
	var body string
	waitFor(t, 2*time.Minute, func() bool {
		var code int
		code, body = readyz(t, td, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "canary on cpu failed")
	})
	if !strings.Contains(body, "no such file") || !strings.Contains(body, "fix:") {
		t.Errorf("/readyz = %q, want the cause (no such file) and a fix", body)
	}
	_, metrics := readyz(t, td, "/metrics")
	for _, want := range []string{`kernelbox_canary_ok{gpu_type="cpu"} 0`, "kernelbox_ready 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	org := newBrowser(t, td.server)
	_, _, page := org.post("/login", url.Values{"token": {td.token}, "next": {"/admin"}}, nil)
	mustContain(t, "organisers' page", page, `id="canary-cpu"`, "Submissions on cpu cannot be judged", "no such file")

	td.loadQuick()
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := td.admin.Submit(t.Context(), api.SubmitRequest{Code: code, Mode: "test"})
	if err != nil {
		t.Fatalf("Submit while the canary fails: %v, want it queued", err)
	}
	// Its job waits for a canary that passes, rather than spend its
	// attempts: for five seconds (a quick run takes well under one) it
	// never leaves the queue.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		v, err := td.admin.Submission(t.Context(), sub.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if v.Status != api.StatusQueued {
			t.Fatalf("submission while the canary fails: %s (%s), want it held in the queue", v.Status, v.Reason)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
