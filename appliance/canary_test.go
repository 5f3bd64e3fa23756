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
	"kernelbox/internal/testutil"
	"kernelbox/problems"
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

// TestCanary_Due: a GPU type's canary is due at once, then after its
// interval; after a failure at once on a slot not yet tried, and only
// when every usable slot failed are the type's jobs held, until a pass.
func TestCanary_Due(t *testing.T) {
	t.Parallel()
	now := time.Unix(1e9, 0)
	c := newCanaries(10*time.Minute, func() time.Time { return now })
	slots := []Slot{{ID: "cpu:0", GPUType: "cpu"}, {ID: "cpu:1", GPUType: "cpu"}}
	c.expect("cpu")
	if got := c.list(); len(got) != 1 || !got[0].Pending || !c.holds("cpu", 2) {
		t.Fatalf("before a run: list() = %+v, holds %v; want cpu pending and held", got, c.holds("cpu", 2))
	}
	s, ok := c.take("cpu", slots)
	if !ok || s.ID != "cpu:0" {
		t.Fatalf("take at start = %v, %v; want cpu:0", s.ID, ok)
	}
	if _, ok := c.take("cpu", slots); ok {
		t.Fatal("take while one is in flight = true")
	}
	c.record(api.Canary{GPUType: "cpu", Slot: "cpu:0", OK: true}, 2)
	if c.holds("cpu", 2) {
		t.Error("holds after a pass")
	}
	now = now.Add(9 * time.Minute)
	if _, ok := c.take("cpu", slots); ok {
		t.Error("take after 9 of 10 minutes = true")
	}
	now = now.Add(time.Minute)
	if s, ok = c.take("cpu", slots); !ok {
		t.Fatal("take after 10 minutes = false")
	}
	c.record(api.Canary{GPUType: "cpu", Slot: s.ID, Reason: "broken"}, 2)
	if c.holds("cpu", 2) {
		t.Error("holds after one of two slots failed: the other may be sound")
	}
	if s, ok = c.take("cpu", slots); !ok || s.ID != "cpu:1" {
		t.Fatalf("take after a failure = %v, %v; want the untried cpu:1 at once", s.ID, ok)
	}
	c.record(api.Canary{GPUType: "cpu", Slot: "cpu:1", Reason: "broken"}, 2)
	if !c.holds("cpu", 2) {
		t.Error("holds after both slots failed = false")
	}
	if r := canaryReasons(c.list()); len(r) != 1 || !strings.Contains(r[0], "broken") {
		t.Errorf("canaryReasons = %q, want the failure", r)
	}
	if _, ok := c.take("cpu", slots); ok {
		t.Error("take right after every slot failed = true, want a minute's wait")
	}
	now = now.Add(time.Minute)
	if _, ok := c.take("cpu", slots); !ok {
		t.Error("take a minute after the last failure = false")
	}
	c.record(api.Canary{GPUType: "cpu", Slot: "cpu:0", OK: true}, 2)
	if c.holds("cpu", 2) || len(canaryReasons(c.list())) != 0 {
		t.Error("still held or unready after a pass")
	}
	c.expect("H100")
	c.unusable("H100") // every slot drained: not waited for
	if r := canaryReasons(c.list()); len(r) != 0 {
		t.Errorf("canaryReasons with a drained type = %q, want none", r)
	}
	var off *canaries
	if _, ok := off.take("cpu", slots); ok || off.list() != nil || off.holds("cpu", 1) {
		t.Error("a nil canaries takes, lists or holds")
	}
}

// TestRunCanary_ExecLauncher: the canary passes where its harness runs,
// and its error names the cause where it cannot.
func TestRunCanary_ExecLauncher(t *testing.T) {
	t.Parallel()
	it := testutil.RequireTorch(t)
	err := RunCanary(t.Context(), CanaryRun{Launcher: problems.ExecLauncher{}, Env: SandboxEnv(it.BinDir), Python: it.Path,
		Device: "cpu", Arch: "cpu", Scratch: t.TempDir()})
	if err != nil {
		t.Fatalf("RunCanary without a sandbox: %v", err)
	}
	err = RunCanary(t.Context(), CanaryRun{Launcher: problems.ExecLauncher{}, Env: SandboxEnv(it.BinDir), Python: filepath.Join(t.TempDir(), "python3"),
		Device: "cpu", Arch: "cpu", Scratch: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("RunCanary with a missing Python = %v, want no such file", err)
	}
}
