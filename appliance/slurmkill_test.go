package appliance

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
)

// killNode kills slurmd and the processes of Slurm job id at once, as a
// node that loses power would: its slurmstepd, its batch script and the
// node side, with everything they started. Only the job's: other
// processes of the host, a second node side included, live on.
func killNode(t *testing.T, id string) {
	t.Helper()
	// Slurm says RUNNING before slurmd has started the batch script: wait
	// for the node side, then take the job's processes before slurmd goes.
	var pids []int
	waitFor(t, 30*time.Second, func() bool {
		pids = jobProcs(id)
		return slices.ContainsFunc(pids, func(p int) bool {
			cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline"))
			return bytes.Contains(cmd, []byte("node\x00run-job\x00"))
		})
	})
	pid, err := os.ReadFile("/run/slurmd.pid")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil {
		_ = syscall.Kill(n, syscall.SIGKILL)
	}
	if len(pids) == 0 {
		t.Fatalf("no process of Slurm job %s found to kill", id)
	}
	t.Logf("killed slurmd and Slurm job %s's processes %v", id, pids)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// jobProcs are the processes of Slurm job id on this machine: its
// slurmstepd ("slurmstepd: [id.batch]"), the processes whose environment
// names the job (the batch script, and the node side, to which the
// script passes SLURM_JOB_ID through env -i), and all their
// descendants. Read from /proc: proctrack/linuxproc keeps no cgroup of
// the job's to read instead.
func jobProcs(id string) []int {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	var roots []int
	stepd := []byte("slurmstepd: [" + id + ".")
	env := []byte("SLURM_JOB_ID=" + id)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		if stat, err := os.ReadFile(filepath.Join(dir, "stat")); err == nil {
			// pid (comm) state ppid ...: comm may hold spaces and parentheses.
			if i := bytes.LastIndexByte(stat, ')'); i > 0 {
				if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
					parent[pid], _ = strconv.Atoi(f[1])
				}
			}
		}
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		environ, _ := os.ReadFile(filepath.Join(dir, "environ"))
		if bytes.HasPrefix(cmd, stepd) || slices.ContainsFunc(bytes.Split(environ, []byte{0}), func(v []byte) bool { return bytes.Equal(v, env) }) {
			roots = append(roots, pid)
		}
	}
	mine := map[int]bool{}
	for _, r := range roots {
		mine[r] = true
	}
	for grew := true; grew; {
		grew = false
		for pid, pp := range parent {
			if mine[pp] && !mine[pid] {
				mine[pid], grew = true, true
			}
		}
	}
	var out []int
	for pid := range mine {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// jobProcs finds a job's processes and their children, and none of
// another job's.
func TestJobProcs(t *testing.T) {
	t.Parallel()
	fake := newFakeSlurm(t)
	cfg := DefaultConfig()
	cfg.Slurm.Coordinator = "http://coordinator.test"
	cfg.Slurm.Pools = []SlurmPool{{GPUType: "cpu", GPUs: 2}}
	fake.config(&cfg)
	// The "node side": a shell whose child sleeps.
	cfg.Slurm.Command = []string{"sh", "-c", "sleep 60; true", "node"}
	s := newSlurm(cfg, "boot", nil, testLogger(t))
	g := runner.Gang{{ID: "slurm:cpu:0", GPUType: "cpu"}}
	var ids []string
	for run := range int64(2) {
		rc := &store.RunContext{Run: store.RunRecord{Run: api.Run{ID: run + 1, Mode: "test"}}}
		id, err := s.submit(t.Context(), g, rc, "tok")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var first, second []int
	waitFor(t, 10*time.Second, func() bool {
		first, second = jobProcs(ids[0]), jobProcs(ids[1])
		return len(first) >= 2 && len(second) >= 2 // the shell and its sleep
	})
	for _, p := range first {
		if slices.Contains(second, p) {
			t.Errorf("jobProcs(%s) = %v and jobProcs(%s) = %v share %d", ids[0], first, ids[1], second, p)
		}
	}
	if !slices.Contains(first, fake.pid(ids[0])) {
		t.Errorf("jobProcs(%s) = %v, without the job's node side %d", ids[0], first, fake.pid(ids[0]))
	}
}
