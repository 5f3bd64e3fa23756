package appliance

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/internal/testutil"
)

// TestDaemon_SandboxOnGPU runs `kernelbox serve` as the packaged unit runs
// it on the GPU machine (testutil.RequireGPU): its own process under
// UMask=0077, the sandbox on, the GPUs it discovers through NVML and the
// harness Python the tests found (on the GPU machine a virtual
// environment under /opt, outside the rootfs's /usr, which is where the
// umask once broke every sandboxed run: docs/history/gpu-runs.md). The
// canaries of the GPU type and of the CPU slots pass and ready the box;
// on the GPU type, through the sandbox with the device nodes, the Triton
// vectoradd template passes in test mode, a wrong solution fails, and a
// leaderboard run passes with a score and unflagged. TestDaemon_UnitUmask
// is the same on the CPU.
func TestDaemon_SandboxOnGPU(t *testing.T) {
	t.Parallel()
	testutil.RequireGPU(t)
	requireRootSandbox(t)
	dir := t.TempDir()
	t.Cleanup(func() { _ = syscall.Unmount(filepath.Join(dir, "sandbox"), syscall.MNT_DETACH) })
	p := startDaemonProcessWith(t, dir, processOptions{umask: "0077", args: []string{"--cgroup-parent", testCgroupParent(t)}})
	admin := p.adminOf(t, dir)
	var h *api.Health
	waitFor(t, 5*time.Minute, func() bool {
		var err error
		h, err = admin.Health(t.Context())
		if err != nil || len(h.Canaries) < 2 {
			return false
		}
		for _, c := range h.Canaries {
			if c.Pending {
				return false
			}
		}
		return true
	})
	gtype := ""
	for _, c := range h.Canaries {
		if !c.OK {
			t.Errorf("the %s canary under umask 0077 failed: %s (%s)", c.GPUType, c.Reason, c.Fix)
		}
		if c.GPUType != "cpu" {
			gtype = c.GPUType
		}
		t.Logf("canary %s on %s: %v in %v", c.GPUType, c.Slot, c.OK, c.Took)
	}
	if gtype == "" {
		t.Fatalf("canaries %+v: none of a GPU type; the daemon found no GPU (health %+v)", h.Canaries, h)
	}
	p.wantReady(t, "after the canaries passed")
	for _, c := range []struct {
		file, mode string
		passed     bool
	}{
		{"templates/triton.py", "test", true},
		{"solutions/wrong/drops_tail.py", "test", false},
		{"templates/triton.py", "leaderboard", true},
	} {
		code, err := os.ReadFile(lib("vectoradd", c.file))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		sub, err := admin.Submit(t.Context(), api.SubmitRequest{Code: code, Leaderboard: "vectoradd", GPU: gtype, Mode: c.mode, FileName: filepath.Base(c.file)})
		if err != nil {
			t.Fatalf("submit %s (%s) on %s: %v", c.file, c.mode, gtype, err)
		}
		v, err := admin.Wait(t.Context(), sub.ID, nil)
		if err != nil {
			t.Fatalf("wait for %s (%s): %v", c.file, c.mode, err)
		}
		t.Logf("%s in %s mode on %s: passed %v, score %v, %v from submit to result", c.file, c.mode, gtype, v.Passed, v.Score, time.Since(start))
		if v.Passed != c.passed || v.Status != api.StatusDone {
			t.Errorf("%s in %s mode on %s: status %s, passed %v (%s), want done and passed %v",
				c.file, c.mode, gtype, v.Status, v.Passed, v.Reason, c.passed)
		}
		if c.mode == "leaderboard" && (v.Score == nil || v.Review != "") {
			t.Errorf("%s ranked on %s: score %v, review %q; want a score and no review", c.file, gtype, v.Score, v.Review)
		}
	}
}
