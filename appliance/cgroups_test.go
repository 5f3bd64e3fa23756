package appliance

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kernelbox/appliance/runner"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

// TestDaemon_OwnCgroups: two daemons on one host, with different data
// directories and no cgroup_parent, put their runs under parents of their
// own. The second one's start-up sweep neither logs about nor removes the
// first one's run cgroups, a live run's nor a dead one's, and each daemon
// removes its parent from every hierarchy when it stops. (With the one
// parent of old, "kernelbox", the second logged "run cgroup without state
// still has processes" about the first's run and removed its empty one.)
func TestDaemon_OwnCgroups(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	if del, err := sandbox.FindDelegation(); err == nil {
		t.Skipf("this test runs in the delegated cgroup %s, which the daemons would take for their runs; run it outside a unit with Delegate=yes", del.Unit)
	}
	a := startBareDaemon(t, t.TempDir())
	parentA := sandbox.DefaultCgroupParent(a.dir)
	if got := a.d.rt.CgroupParent(); got != parentA {
		t.Fatalf("the first daemon's cgroup parent = %q, want %q (named after its data directory)", got, parentA)
	}

	// A live run of the first daemon's, and a dead run's empty cgroup
	// (one whose Destroy failed): both are the first daemon's business.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		l := policies.DefaultLimits()
		l.Memory, l.TmpSize, l.WallTime = 256<<20, 16<<20, time.Minute
		_, err := a.d.rt.Run(ctx, sandbox.Spec{Args: []string{"sleep", "60"}, Env: runner.SandboxEnv(), Binds: sandbox.DefaultBinds(), Limits: l})
		ran <- err
	}()
	// Wait for sleep itself: runc joins the run's cgroups one hierarchy
	// at a time before it execs, so a process in one of them does not
	// yet mean a parent in all of them (freezer and name=systemd come
	// last on v1).
	var live []string
	waitFor(t, 20*time.Second, func() bool {
		live = runCgroupsWithProcs(parentA)
		return len(live) > 0 && execed(live[0], "sleep")
	})
	live = runCgroupsWithProcs(parentA)
	dirsA := cgroupDirs(parentA)
	var dead []string
	for _, d := range dirsA {
		dead = append(dead, filepath.Join(d, "kb-0000000000000000"))
		if err := os.Mkdir(dead[len(dead)-1], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range dead {
			_ = os.Remove(d)
		}
	})

	b := startBareDaemon(t, t.TempDir())
	parentB := sandbox.DefaultCgroupParent(b.dir)
	if parentB == parentA || b.d.rt.CgroupParent() != parentB {
		t.Fatalf("the second daemon's cgroup parent = %q, want %q, not the first's %q", b.d.rt.CgroupParent(), parentB, parentA)
	}
	for _, line := range b.log.lines() {
		if strings.Contains(line, parentA) || strings.Contains(line, "run cgroup") {
			t.Errorf("the second daemon logged about the first's cgroups: %s", line)
		}
	}
	for _, d := range append(live, dead...) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the first daemon's run cgroup after the second's start: %v", err)
		}
	}
	if len(cgroupDirs(parentB)) == 0 {
		t.Errorf("the second daemon has no parent cgroup %s (its budget makes one)", parentB)
	}

	b.stop()
	if left := cgroupDirs(parentB); len(left) > 0 {
		t.Errorf("the second daemon left its parent cgroup after a clean stop: %v", left)
	}
	if got := cgroupDirs(parentA); len(got) != len(dirsA) {
		t.Errorf("the first daemon's parent after the second's stop: %v, want %v", got, dirsA)
	}

	cancel()
	if err := <-ran; err != nil {
		t.Errorf("the first daemon's run: %v", err)
	}
	for _, d := range dead {
		if err := os.Remove(d); err != nil {
			t.Error(err)
		}
	}
	a.stop()
	if left := cgroupDirs(parentA); len(left) > 0 {
		t.Errorf("the first daemon left its parent cgroup after a clean stop: %v", left)
	}
	// Neither warned about cgroups (a parent it could not remove, a run
	// cgroup it found); their other complaint, no slots, is this test's.
	for _, line := range append(a.log.lines(), b.log.lines()...) {
		if strings.Contains(line, "cgroup") && (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) {
			t.Errorf("a daemon logged: %s", line)
		}
	}
}

// bareDaemon is a daemon with the real sandbox and nothing to run it for:
// no slots, so neither PyTorch nor the CPU measurement is needed.
type bareDaemon struct {
	d    *Daemon
	dir  string
	log  *logLines
	once sync.Once
	t    testing.TB
}

func startBareDaemon(t testing.TB, dir string) *bareDaemon {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.Listen = "127.0.0.1:0"
	cfg.CPUSlots = 0
	cfg.GPUs = "none"
	cfg.Library = false
	cfg.Standby = false
	cfg.Budget = BudgetConfig{Memory: 8 << 30, Pids: 8000}
	log := &logLines{t: t}
	d := NewDaemon(cfg, slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	d.Python = &problems.Interpreter{} // never started: there are no slots
	if err := d.Start(t.Context()); err != nil {
		t.Fatalf("Daemon.Start: %v", err)
	}
	if d.rt == nil {
		t.Fatalf("the daemon has no sandbox: %v", d.svc.health)
	}
	bd := &bareDaemon{d: d, dir: dir, log: log, t: t}
	t.Cleanup(bd.stop)
	return bd
}

func (bd *bareDaemon) stop() {
	bd.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := bd.d.Stop(ctx); err != nil {
			bd.t.Errorf("Daemon.Stop: %v", err)
		}
	})
}

// logLines keeps what a daemon logs, and passes it on to t.Log.
type logLines struct {
	t   testing.TB
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.buf.String()), "\n")
}

// cgroupDirs lists the directories of the cgroup parent: in the cgroup2
// tree, or in each v1 hierarchy and a hybrid host's unified tree.
func cgroupDirs(parent string) []string {
	var dirs []string
	for _, pattern := range []string{"/sys/fs/cgroup/" + parent, "/sys/fs/cgroup/*/" + parent} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if st, err := os.Lstat(m); err == nil && st.IsDir() {
				dirs = append(dirs, m)
			}
		}
	}
	return dirs
}

// runCgroupsWithProcs lists the run cgroups under the parent that hold a
// process.
func runCgroupsWithProcs(parent string) []string {
	var out []string
	for _, d := range cgroupDirs(parent) {
		runs, _ := filepath.Glob(filepath.Join(d, "kb-*"))
		for _, r := range runs {
			if procs, err := os.ReadFile(filepath.Join(r, "cgroup.procs")); err == nil && len(bytes.TrimSpace(procs)) > 0 {
				out = append(out, r)
			}
		}
	}
	return out
}

// execed says whether a process in the cgroup runs the named command.
func execed(cgroup, comm string) bool {
	procs, err := os.ReadFile(filepath.Join(cgroup, "cgroup.procs"))
	if err != nil {
		return false
	}
	for _, pid := range strings.Fields(string(procs)) {
		if c, err := os.ReadFile(filepath.Join("/proc", pid, "comm")); err == nil && strings.TrimSpace(string(c)) == comm {
			return true
		}
	}
	return false
}
