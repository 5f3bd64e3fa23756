package runner

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/internal/testutil"
	"kernelbox/problems"
)

// TestCanary_Due: a GPU type's canary is due at once, then after its
// interval; after a failure at once on a slot not yet tried, and only
// when every usable slot failed are the type's jobs held, until a pass.
func TestCanary_Due(t *testing.T) {
	t.Parallel()
	now := time.Unix(1e9, 0)
	c := NewCanaries(10*time.Minute, func() time.Time { return now })
	slots := []Slot{{ID: "cpu:0", GPUType: "cpu"}, {ID: "cpu:1", GPUType: "cpu"}}
	c.expect("cpu")
	if got := c.List(); len(got) != 1 || !got[0].Pending || !c.holds("cpu", 2) {
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
	if r := CanaryReasons(c.List()); len(r) != 1 || !strings.Contains(r[0], "broken") {
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
	if c.holds("cpu", 2) || len(CanaryReasons(c.List())) != 0 {
		t.Error("still held or unready after a pass")
	}
	c.expect("H100")
	c.unusable("H100") // every slot drained: not waited for
	if r := CanaryReasons(c.List()); len(r) != 0 {
		t.Errorf("canaryReasons with a drained type = %q, want none", r)
	}
	var off *Canaries
	if _, ok := off.take("cpu", slots); ok || off.List() != nil || off.holds("cpu", 1) {
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
