package appliance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/gpu/gputest"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

// A problem whose files reach beside its directory (the bundled ones
// share ../harness) arrives whole on a node, and its fingerprint is the
// coordinator's; a file that would land outside the node's directory,
// or a changed file, is refused.
func TestWriteNodeProblem(t *testing.T) {
	t.Parallel()
	src := filepath.Join(lib("vectoradd"))
	task, err := problems.LoadTask(src)
	if err != nil {
		t.Fatal(err)
	}
	sha, err := task.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, p := range append([]string{"task.yml"}, task.Sources()...) {
		data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		files[p] = data
	}
	if !strings.HasPrefix(strings.Join(task.Sources(), " "), "../") && !strings.Contains(strings.Join(task.Sources(), " "), " ../") {
		t.Fatalf("vectoradd's sources %q reach nowhere beside it: the test needs a problem that does", task.Sources())
	}
	job := api.NodeJob{Leaderboard: "vectoradd", Problem: files, ProblemSHA: sha}
	dir := t.TempDir()
	got, err := writeNodeProblem(dir, job)
	if err != nil {
		t.Fatalf("writeNodeProblem: %v", err)
	}
	if got.Name != "vectoradd" || !strings.HasPrefix(got.Dir, dir) {
		t.Errorf("task %s in %s, want vectoradd under %s", got.Name, got.Dir, dir)
	}

	// However far up a file reaches, it lands inside the node's directory.
	deep := map[string][]byte{"../../../../kernelbox-reach": []byte("x"), "a/../../../../../kernelbox-reach2": []byte("y")}
	for k, v := range files {
		deep[k] = v
	}
	dir = filepath.Join(t.TempDir(), "job")
	if _, err := writeNodeProblem(dir, api.NodeJob{Leaderboard: "vectoradd", Problem: deep, ProblemSHA: sha}); err != nil {
		t.Fatalf("writeNodeProblem with files four levels up: %v", err)
	}
	for _, name := range []string{"kernelbox-reach", "kernelbox-reach2"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s is not at the top of the node's directory: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), name)); err == nil {
			t.Errorf("%s was written outside the node's directory", name)
		}
	}

	for name, change := range map[string]func(map[string][]byte){
		"absolute": func(f map[string][]byte) { f["/etc/kernelbox-test"] = []byte("x") },
		"changed":  func(f map[string][]byte) { f["reference.py"] = append(f["reference.py"], '\n') },
		"no task":  func(f map[string][]byte) { delete(f, "task.yml") },
		"dot-dot":  func(f map[string][]byte) { f[".."] = []byte("x") },
	} {
		bad := map[string][]byte{}
		for k, v := range files {
			bad[k] = v
		}
		change(bad)
		if _, err := writeNodeProblem(t.TempDir(), api.NodeJob{Leaderboard: "vectoradd", Problem: bad, ProblemSHA: sha}); err == nil {
			t.Errorf("%s: writeNodeProblem = nil error, want a refusal", name)
		}
	}
}

// A kept probe of the harness interpreter stands for an hour, and not
// after the config names another interpreter or its directories change.
func TestCachedPython(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if err := os.MkdirAll(venv, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(venv, "python3")
	if err := os.WriteFile(exe, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "python.json")
	it := &problems.Interpreter{Path: exe, Torch: "2.5.0", Device: "cuda", Dirs: []string{venv}}
	if got := cachedPython(file, exe); got != nil {
		t.Fatalf("cachedPython with no file = %+v, want nil", got)
	}
	keepPython(file, exe, it, testLogger(t))
	if got := cachedPython(file, exe); got == nil || got.Torch != "2.5.0" || got.Path != exe {
		t.Fatalf("cachedPython after keepPython = %+v", got)
	}
	if got := cachedPython(file, "/usr/bin/python3"); got != nil {
		t.Errorf("another configured python got the kept probe %+v", got)
	}
	// torch upgraded: its directory changes.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(venv, later, later); err != nil {
		t.Fatal(err)
	}
	if got := cachedPython(file, exe); got != nil {
		t.Errorf("after the interpreter's directory changed: %+v, want nil", got)
	}
	// An old probe.
	keepPython(file, exe, it, testLogger(t))
	var p pythonProbe
	data, _ := os.ReadFile(file)
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	p.At = time.Now().Add(-2 * pythonProbeLife)
	data, _ = json.Marshal(p)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := cachedPython(file, exe); got != nil {
		t.Errorf("a probe two hours old: %+v, want nil", got)
	}
}

// The GPUs a node's run takes from what Slurm gave its job: a ranked
// run's job (--exclusive) gets every GPU of the node, and the run takes
// only as many as it needs; GPUs of another type than the pool's are
// never taken.
func TestNodeSlots(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.GPUs = "auto"
	d := NewDaemon(cfg, testLogger(t))
	d.nvml = &gputest.NVML{Driver: "580.0", GPUs: []gputest.GPU{
		{Name: "NVIDIA H200", UUID: "GPU-aaaa", Minor: 0, PCI: "00000000:00:06.0", NUMA: -1},
		{Name: "NVIDIA H200", UUID: "GPU-bbbb", Minor: 1, PCI: "00000000:00:07.0", NUMA: -1},
	}}
	d.gpuRoot = filepath.Join("..", "gpu", "testdata", "nvidia")
	for _, tc := range []struct {
		slurm, gpuType string
		gpus           int
		want           string // the slots' ids, or the error's words
	}{
		{"0", "H200", 1, "GPU-aaaa"},
		{"1", "H200", 1, "GPU-bbbb"},
		{"0,1", "H200", 1, "GPU-aaaa"}, // --exclusive: both given, one taken
		{"0-1", "H200", 2, "GPU-aaaa+GPU-bbbb"},
		{"0", "H200", 2, "the run needs 2"},
		{"0-1", "H100", 1, "GPU 0 is a H200, GPU 1 is a H200: map this GRES"},
		{"", "H200", 1, "SLURM_JOB_GPUS is empty"},
		{"7", "H200", 1, "GPU 7, which Slurm gave the job, is not on this node"},
		{"x", "H200", 1, `SLURM_JOB_GPUS "x"`},
	} {
		slots, err := d.nodeSlots(t.Context(), api.NodeJob{GPUType: tc.gpuType, GPUs: tc.gpus}, tc.slurm)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = runner.Gang(slots).IDs()
		}
		if !strings.Contains(got, tc.want) || (err == nil) != !strings.Contains(tc.want, " ") {
			t.Errorf("nodeSlots(%q, %s x%d) = %q, want %q", tc.slurm, tc.gpuType, tc.gpus, got, tc.want)
		}
	}
}

// A job killed outright leaves its directory (and maybe a mounted
// sandbox); the next job on the node removes it, but never a live job's
// (its lock is held) or one made a moment ago (its lock may not be yet).
func TestSweepNodeJobs(t *testing.T) {
	requireRootSandbox(t)
	t.Parallel()
	cfg := DefaultConfig()
	cfg.CgroupParent = testCgroupParent(t)
	dir := t.TempDir()
	old := time.Now().Add(-time.Minute)
	for _, name := range []string{"job-1", "job-2", "job-3"} {
		if err := os.MkdirAll(filepath.Join(dir, name, "work"), 0o700); err != nil {
			t.Fatal(err)
		}
		// job-3 made a moment ago, however long the sandbox below takes.
		at := old
		if name == "job-3" {
			at = time.Now().Add(time.Minute)
		}
		if err := os.Chtimes(filepath.Join(dir, name), at, at); err != nil {
			t.Fatal(err)
		}
	}
	// job-1 died with its sandbox's tmpfs mounted.
	rt, err := sandbox.NewRuntime(filepath.Join(dir, "job-1", "sandbox"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = rt // not closed: the mount stays, as a killed process leaves it
	if err := os.Chtimes(filepath.Join(dir, "job-1"), old, old); err != nil {
		t.Fatal(err)
	}
	live, err := lockDataDir(filepath.Join(dir, "job-2"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	// Taking the lock made its file, which made job-2 new again: old it
	// must be, or the sweep would pass it by its age and never try the lock.
	if err := os.Chtimes(filepath.Join(dir, "job-2"), old, old); err != nil {
		t.Fatal(err)
	}
	sweepNodeJobs(cfg, dir, testLogger(t))
	for name, want := range map[string]bool{"job-1": false, "job-2": true, "job-3": true} {
		_, err := os.Stat(filepath.Join(dir, name))
		if got := err == nil; got != want {
			t.Errorf("%s there after the sweep: %v, want %v (%v)", name, got, want, err)
		}
	}
}
