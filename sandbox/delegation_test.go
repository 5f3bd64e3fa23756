//go:build linux

package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/cgroups/v3"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestFindDelegation(t *testing.T) {
	t.Parallel()
	const unit = "system.slice/kernelbox.service"
	delegated := cgroupFacts{Exists: true, Delegated: true, Owner: 0, Controllers: []string{"cpuset", "cpu", "io", "memory", "pids"}}
	// A hybrid host's /proc/self/cgroup: v1 lines, and the v2 one.
	hybrid := "12:memory:/system.slice/kernelbox.service\n1:name=systemd:/system.slice/kernelbox.service\n0::/system.slice/kernelbox.service\n"
	for _, tt := range []struct {
		name    string
		self    string
		unified bool
		euid    int
		facts   map[string]cgroupFacts
		want    Delegation
		wantErr string // a piece of the reason; "" for a delegation
	}{
		{name: "unit with Delegate=yes", self: "0::/" + unit + "\n", unified: true,
			facts: map[string]cgroupFacts{unit: delegated},
			want:  Delegation{Unit: unit, Leaf: unit + "/daemon"}},
		{name: "restarted in the daemon leaf (DelegateSubgroup=daemon)", self: "0::/" + unit + "/daemon\n", unified: true,
			facts: map[string]cgroupFacts{unit: delegated, unit + "/daemon": {Exists: true}},
			want:  Delegation{Unit: unit, Leaf: unit + "/daemon"}},
		{name: "a template instance", self: "0::/system.slice/system-kernelbox.slice/kernelbox@a.service\n", unified: true,
			facts: map[string]cgroupFacts{"system.slice/system-kernelbox.slice/kernelbox@a.service": delegated},
			want:  Delegation{Unit: "system.slice/system-kernelbox.slice/kernelbox@a.service", Leaf: "system.slice/system-kernelbox.slice/kernelbox@a.service/daemon"}},
		{name: "hybrid host", self: hybrid, unified: false,
			facts: map[string]cgroupFacts{unit: delegated}, wantErr: "v1 or hybrid"},
		{name: "no v2 line", self: "4:memory:/" + unit + "\n", unified: true,
			facts: map[string]cgroupFacts{unit: delegated}, wantErr: "no cgroup v2 entry"},
		{name: "root cgroup (a shell, a container)", self: "0::/\n", unified: true,
			facts: map[string]cgroupFacts{"": delegated}, wantErr: "root cgroup"},
		{name: "unit without Delegate=yes", self: "0::/" + unit + "\n", unified: true,
			facts: map[string]cgroupFacts{unit: {Exists: true, Controllers: delegated.Controllers}}, wantErr: "not delegated"},
		{name: "a session scope", self: "0::/user.slice/user-1000.slice/session-4.scope\n", unified: true,
			facts: map[string]cgroupFacts{"user.slice/user-1000.slice/session-4.scope": {Exists: true}}, wantErr: "not delegated"},
		{name: "under a subtree another manager delegated", self: "0::/user.slice/user-1000.slice/user@1000.service/init.scope\n", unified: true,
			facts:   map[string]cgroupFacts{"user.slice/user-1000.slice/user@1000.service": delegated, "user.slice/user-1000.slice/user@1000.service/init.scope": {Exists: true}},
			wantErr: "not delegated"},
		{name: "cgroup not in the mount (another namespace)", self: "0::/" + unit + "\n", unified: true,
			facts: map[string]cgroupFacts{}, wantErr: "not in the cgroup2 mount"},
		{name: "delegated to another user", self: "0::/" + unit + "\n", unified: true,
			facts: map[string]cgroupFacts{unit: {Exists: true, Delegated: true, Owner: 999, Controllers: delegated.Controllers}}, wantErr: "belongs to uid 999"},
		{name: "Delegate=memory pids only", self: "0::/" + unit + "\n", unified: true,
			facts: map[string]cgroupFacts{unit: {Exists: true, Delegated: true, Controllers: []string{"memory", "pids"}}}, wantErr: "lacks the controllers cpu, cpuset"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stat := func(cg string) cgroupFacts { return tt.facts[cg] }
			got, err := findDelegation(tt.self, tt.unified, tt.euid, stat, runControllers)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrNotDelegated) || !regexp.MustCompile(regexp.QuoteMeta(tt.wantErr)).MatchString(err.Error()) {
					t.Fatalf("findDelegation() = %+v, %v; want ErrNotDelegated saying %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("findDelegation() = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("findDelegation() mismatch (-want +got):\n%s", diff)
			}
			if runs := got.Runs(); runs != tt.want.Unit+"/runs" || CheckCgroupParent(runs) != nil {
				t.Errorf("Runs() = %q, want %s/runs, a valid parent", runs, tt.want.Unit)
			}
		})
	}
}

// TestRuntime_UseDelegation plays systemd on a real cgroup2 tree: a unit
// cgroup marked delegated, with a process in it standing for the daemon.
// FindDelegation's reading of it finds the unit, and UseDelegation moves
// the process into the daemon leaf, enables the unit's controllers for its
// children (cgroup v2 refuses that while a process is in the unit's own
// cgroup), makes the runs' parent, and Close removes that parent again.
// On a hybrid host this is the unified tree beside the v1 hierarchies: it
// has few controllers or none, and runs are not tried under it.
func TestRuntime_UseDelegation(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t)
	mount, err := cgroupMount("cgroup2", "")
	if err != nil {
		t.Skipf("needs a cgroup2 mount (cgroup v2, or a hybrid host's unified tree): %v", err)
	}
	unit := "kernelbox-test-" + newID() + ".service"
	unitDir := filepath.Join(mount, unit)
	if err := os.Mkdir(unitDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range []string{"runs", "daemon", ""} {
			if err := os.Remove(filepath.Join(unitDir, d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("remove the test's unit cgroup: %v", err)
			}
		}
	})
	// What systemd does for a unit with Delegate=yes.
	if err := unix.Setxattr(unitDir, "trusted.delegate", []byte("1"), 0); err != nil {
		t.Skipf("cannot mark %s delegated (trusted xattrs on cgroupfs need Linux 5.7 or later and root): %v", unitDir, err)
	}
	daemon := exec.Command("sleep", "300")
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = daemon.Process.Kill()
		_ = daemon.Wait()
	})
	pid := strconv.Itoa(daemon.Process.Pid)
	if err := os.WriteFile(filepath.Join(unitDir, "cgroup.procs"), []byte(pid), 0); err != nil {
		t.Fatal(err)
	}

	// The controllers this tree offers are what the runs may need of it;
	// a hybrid host's unified tree has almost none.
	var offered []string
	if b, err := os.ReadFile(filepath.Join(unitDir, "cgroup.controllers")); err == nil {
		offered = strings.Fields(string(b))
	}
	find := func() Delegation {
		t.Helper()
		self, err := os.ReadFile("/proc/" + pid + "/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		del, err := findDelegation(string(self), true, os.Geteuid(), func(cg string) cgroupFacts {
			return statCgroup(filepath.Join(mount, cg))
		}, offered)
		if err != nil {
			t.Fatalf("findDelegation(%q) = %v", self, err)
		}
		return del
	}
	want := Delegation{Unit: unit, Leaf: unit + "/daemon"}
	del := find()
	if diff := cmp.Diff(want, del); diff != "" {
		t.Fatalf("findDelegation() mismatch (-want +got):\n%s", diff)
	}
	if err := r.UseDelegation(del); err != nil {
		t.Fatalf("UseDelegation(%+v) = %v", del, err)
	}
	if got := r.CgroupParent(); got != unit+"/runs" {
		t.Errorf("CgroupParent() = %q after UseDelegation, want %s/runs", got, unit)
	}
	if self, _ := os.ReadFile("/proc/" + pid + "/cgroup"); !strings.Contains(string(self), "0::/"+unit+"/daemon\n") {
		t.Errorf("the daemon's /proc/PID/cgroup = %q, want it in %s/daemon", self, unit)
	}
	if procs, _ := os.ReadFile(filepath.Join(unitDir, "cgroup.procs")); len(strings.TrimSpace(string(procs))) > 0 {
		t.Errorf("the unit's own cgroup still holds %q", procs)
	}
	if b, _ := os.ReadFile(filepath.Join(unitDir, "cgroup.subtree_control")); !cmp.Equal(strings.Fields(string(b)), offered, cmpEmpty) {
		t.Errorf("the unit's subtree_control = %q, want its controllers %q", b, offered)
	}
	if st, err := os.Stat(filepath.Join(unitDir, "runs")); err != nil || !st.IsDir() {
		t.Errorf("the runs' parent %s/runs: %v", unit, err)
	}

	// A daemon restarted in its leaf (DelegateSubgroup=daemon) finds the
	// same subtree, and taking it again changes nothing.
	if del := find(); !cmp.Equal(del, want) {
		t.Errorf("findDelegation() from the leaf = %+v, want %+v", del, want)
	}
	if err := r.UseDelegation(want); err != nil {
		t.Errorf("UseDelegation() again = %v", err)
	}

	if cgroups.Mode() == cgroups.Unified {
		res, err := r.Run(t.Context(), shSpec("echo ok"))
		if err != nil || res.Verdict != VerdictOK {
			t.Errorf("Run() under the delegated parent = %+v, %v; want ok", res, err)
		} else {
			requireHostClean(t, r, res.ID)
		}
	} else {
		t.Log("not a cgroup v2 host: no run is tried under the delegated parent (libcontainer would put its limits in the v1 hierarchies)")
	}

	if err := r.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if _, err := os.Stat(filepath.Join(unitDir, "runs")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s/runs after Close: %v, want it removed", unit, err)
	}
	if _, err := os.Stat(filepath.Join(unitDir, "daemon")); err != nil {
		t.Errorf("the daemon's leaf after Close: %v, want it kept (the daemon is in it)", err)
	}
}

// cmpEmpty makes nil and empty slices equal.
var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return strings.Join(a, " ") == strings.Join(b, " ") })
