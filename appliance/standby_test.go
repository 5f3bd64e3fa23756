package appliance

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/gpu/gputest"
	"kernelbox/problems"
)

// TestDaemon_Standby: on a box with one (fake) GPU, the idle GPU keeps a
// standby harness in the real sandbox; a vectoradd run on our harness is
// handed to it (its judge waited at the gate while the standby was idle,
// prepared before the run came) and passes, a wrong kernel handed to the
// next standby fails, and a run on another harness stops the standby and
// runs in a sandbox of its own. A new standby follows each run.
func TestDaemon_Standby(t *testing.T) {
	t.Parallel()
	td := fakeH200Daemon(t, true)
	lib := loadVectoraddOnH200(t, td)
	td.loadQuickOn("[H200]")
	ctx := t.Context()
	r := td.d.runner
	standbyReady := func() {
		t.Helper()
		waitFor(t, 60*time.Second, func() bool { _, ok := r.Standby("GPU-aaaa"); return ok })
		time.Sleep(time.Second) // it may still be importing torch: the run waits for it
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(lib, "vectoradd", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const slot = "GPU-aaaa" // the fake H200's
	var handed int64
	for _, c := range []struct {
		board, file string
		code        []byte
		passed      bool
		handed      bool
	}{
		{"vectoradd", "templates/torch.py", read("templates/torch.py"), true, true},
		{"vectoradd", "solutions/wrong/drops_tail.py", read("solutions/wrong/drops_tail.py"), false, true},
		{"quickgpu", "double", []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n"), true, false},
	} {
		standbyReady()
		sub, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: c.board, GPU: "H200", Mode: "test", Code: c.code})
		if err != nil {
			t.Fatal(err)
		}
		v, err := td.admin.Wait(ctx, sub.ID, nil)
		if err != nil || len(v.Runs) != 1 {
			t.Fatalf("%s: %+v, %v", c.file, v, err)
		}
		if v.Passed != c.passed {
			t.Errorf("%s on %s: passed %v (%s), want %v", c.file, slot, v.Passed, v.Runs[0].Reason, c.passed)
		}
		if n := r.Handed(); (n > handed) != c.handed {
			t.Errorf("%s: handed to the standby = %v, want %v", c.file, n > handed, c.handed)
		}
		handed = r.Handed()
		var rep problems.Report
		if err := json.Unmarshal(v.Runs[0].Report, &rep); err != nil || len(rep.Phases) == 0 || rep.Phases[0].Result == nil {
			t.Fatalf("%s: report %s: %v", c.file, v.Runs[0].Report, err)
		}
		// Our judge, standby or not, says how long it waited at its gate.
		if _, ok := rep.Phases[0].Result.Extra["judge-gate"]; ok != (c.board == "vectoradd") {
			t.Errorf("%s: extras %v: judge-gate there = %v", c.file, rep.Phases[0].Result.Extra, ok)
		}
	}
	// The last run stopped the standby it could not use; the GPU gets a new one.
	standbyReady()
}

// TestDaemon_StandbyWhileBusy: the next standby starts while a run has
// the GPU, so its imports overlap that run instead of the next one's wait.
func TestDaemon_StandbyWhileBusy(t *testing.T) {
	t.Parallel()
	td := fakeH200Daemon(t, true)
	td.loadQuickOn("[H200]")
	ctx := t.Context()
	r := td.d.runner
	const slot = "GPU-aaaa" // the fake H200's
	standby := func() any {
		v, _ := r.Standby(slot)
		return v
	}
	waitFor(t, 60*time.Second, func() bool { return standby() != nil })
	first := standby()
	// quickgpu runs its own harness: the run stops the standby it finds,
	// and holds the GPU for its two tests' sleeps.
	slow := []byte("import time\n\ndef custom_kernel(xs):\n    time.sleep(4)\n    return [2 * x for x in xs]\n")
	sub, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", GPU: "H200", Mode: "test", Code: slow})
	if err != nil {
		t.Fatal(err)
	}
	var during bool
	waitFor(t, 60*time.Second, func() bool {
		busy := r.Busy(slot)
		sb := standby()
		during = busy && sb != nil && sb != first
		if v, err := td.admin.Submission(ctx, sub.ID, false); err == nil && v.Status == api.StatusDone {
			return true
		}
		return during
	})
	if !during {
		t.Fatal("the run ended before a new standby started on its busy GPU")
	}
	if v, err := td.admin.Wait(ctx, sub.ID, nil); err != nil || !v.Passed {
		t.Fatalf("the slow run: %+v, %v", v, err)
	}
}

// fakeH200Daemon is a daemon on one fake H200 (no CPU slots), with
// standbys on or off.
func fakeH200Daemon(t testing.TB, standby bool) *testDaemon {
	return startDaemonWith(t, t.TempDir(), func(c *Config) {
		c.CPUSlots, c.GPUs, c.Standby = 0, "auto", standby
		c.MaxQueuedPerUser, c.RateLimits = 100000, map[string]int{}
	}, func(d *Daemon) {
		d.nvml = &gputest.NVML{Driver: "580.0", GPUs: []gputest.GPU{
			{Name: "NVIDIA H200", UUID: "GPU-aaaa", Minor: 0, PCI: "00000000:00:06.0", NUMA: -1},
		}}
		d.gpuRoot = filepath.Join("..", "gpu", "testdata", "nvidia")
	})
}

// loadVectoraddOnH200 loads the bundled vectoradd on the fake H200, its
// harness in its directory (an upload leaves out ../ files: issue 19),
// and returns the library's copy it loaded from.
func loadVectoraddOnH200(t testing.TB, td *testDaemon) string {
	t.Helper()
	lib := t.TempDir()
	if err := os.CopyFS(lib, problems.Library()); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(lib, "vectoradd"), os.DirFS(filepath.Join(lib, "harness"))); err != nil {
		t.Fatal(err)
	}
	task := filepath.Join(lib, "vectoradd", "task.yml")
	yml, err := os.ReadFile(task)
	if err != nil {
		t.Fatal(err)
	}
	yml = append(bytes.ReplaceAll(yml, []byte("../harness/"), nil), "\ngpus: [H200]\n"...)
	if err := os.WriteFile(task, yml, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := td.cli(td.token, "admin", "problems", "load", filepath.Join(lib, "vectoradd")); code != 0 {
		t.Fatalf("load vectoradd: exit %d: %s", code, errOut)
	}
	return lib
}
