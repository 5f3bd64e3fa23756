//go:build linux

package sandbox

// Running the sandboxes in the cgroup v2 subtree systemd delegated to the
// daemon's unit. Whether there is one to use is a pure function of
// /proc/self/cgroup and a few facts about cgroups (findDelegation), so that
// every case is unit-tested without systemd.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// ErrNotDelegated wraps the reason the runs' cgroups cannot go under this
// process's own cgroup (FindDelegation).
var ErrNotDelegated = errors.New("no delegated cgroup")

// Delegation is a cgroup v2 subtree that systemd delegated to this process's
// unit (Delegate=yes), with where this process lives in it. Paths are
// relative to the root of the cgroup2 mount.
type Delegation struct {
	// Unit is the unit's cgroup: system.slice/kernelbox.service.
	Unit string
	// Leaf is this process's cgroup under Unit (Unit/daemon): cgroup v2
	// lets a cgroup hand controllers to children only while it holds no
	// process itself, so the daemon cannot stay in Unit beside the runs.
	Leaf string
}

// Runs is the parent of the runs' cgroups: Unit/runs.
func (d Delegation) Runs() string { return d.Unit + "/runs" }

// daemonLeaf is the name of the daemon's own cgroup under its unit's.
const daemonLeaf = "daemon"

// runControllers are the controllers the runs' limits need
// (configureCgroups, SetBudget): without one of them in the unit's cgroup,
// every run would fail to start.
var runControllers = []string{"cpu", "cpuset", "memory", "pids"}

// cgroupFacts are what findDelegation needs to know of one cgroup.
type cgroupFacts struct {
	Exists bool
	// Delegated: systemd marked it as a delegated unit's (the
	// trusted.delegate or user.delegate xattr is "1").
	Delegated bool
	// Owner owns the directory: systemd chowns a delegated cgroup to the
	// unit's User=.
	Owner int
	// Controllers are those it may enable for its children
	// (cgroup.controllers).
	Controllers []string
}

// findDelegation decides whether the runs' cgroups can go under the cgroup
// v2 subtree systemd delegated to this process's unit. procSelfCgroup is
// the text of /proc/self/cgroup; unified says the host runs cgroup v2 alone
// (on a v1 or hybrid host libcontainer puts the runs' limits in the v1
// hierarchies, which systemd does not delegate); stat reports on a cgroup
// given relative to the cgroup2 root; need are the controllers the runs
// must have. The error wraps ErrNotDelegated with the reason.
//
// The process may be in the unit's own cgroup (a fresh start: systemd puts
// the main process there) or already in the daemon leaf under it (a unit
// with DelegateSubgroup=daemon, systemd v254 and later). Any other cgroup
// under a delegated one belongs to whatever manages that subtree (a
// user's systemd, a container's runtime), and is left alone.
func findDelegation(procSelfCgroup string, unified bool, euid int, stat func(cgroup string) cgroupFacts, need []string) (Delegation, error) {
	no := func(format string, args ...any) (Delegation, error) {
		return Delegation{}, fmt.Errorf("%w: %s", ErrNotDelegated, fmt.Sprintf(format, args...))
	}
	if !unified {
		return no("the host's cgroups are v1 or hybrid, and systemd delegates only cgroup v2 subtrees")
	}
	own, ok := "", false
	for line := range strings.SplitSeq(procSelfCgroup, "\n") {
		if p, found := strings.CutPrefix(line, "0::"); found {
			own, ok = p, true
		}
	}
	if !ok {
		return no("/proc/self/cgroup has no cgroup v2 entry")
	}
	own = strings.Trim(path.Clean(own), "/")
	if own == "" || own == "." {
		return no("this process is in the root cgroup: not started by systemd, or in a cgroup namespace of its own")
	}
	del := Delegation{Unit: own, Leaf: own + "/" + daemonLeaf}
	f := stat(own)
	if !f.Delegated && path.Base(own) == daemonLeaf && path.Dir(own) != "." {
		if up := stat(path.Dir(own)); up.Delegated {
			del, f = Delegation{Unit: path.Dir(own), Leaf: own}, up
		}
	}
	switch {
	case !f.Exists:
		return no("cgroup %s is not in the cgroup2 mount", own)
	case !f.Delegated:
		return no("cgroup %s is not delegated (a unit without Delegate=yes, or a systemd that does not mark delegation)", own)
	case f.Owner != euid:
		return no("cgroup %s belongs to uid %d, not to this process's %d", del.Unit, f.Owner, euid)
	}
	var missing []string
	for _, c := range need {
		if !slices.Contains(f.Controllers, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return no("cgroup %s lacks the controllers %s (Delegate= must include them)", del.Unit, strings.Join(missing, ", "))
	}
	return del, nil
}

// FindDelegation finds the cgroup v2 subtree systemd delegated to this
// process's unit (Delegate=yes), from /proc/self/cgroup and the unit's
// cgroup: its delegation mark, owner and controllers. The error wraps
// ErrNotDelegated with the reason there is none to use.
func FindDelegation() (Delegation, error) {
	unified := cgroups.Mode() == cgroups.Unified
	if !unified {
		return findDelegation("", false, 0, nil, nil)
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return Delegation{}, fmt.Errorf("find delegated cgroup: %w", err)
	}
	mount, err := cgroupMount("cgroup2", "")
	if err != nil {
		return Delegation{}, fmt.Errorf("find delegated cgroup: %w", err)
	}
	return findDelegation(string(self), true, os.Geteuid(), func(cg string) cgroupFacts {
		return statCgroup(filepath.Join(mount, cg))
	}, runControllers)
}

// statCgroup reads the facts findDelegation weighs of the cgroup at dir.
func statCgroup(dir string) cgroupFacts {
	var f cgroupFacts
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return f
	}
	f.Exists = true
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		f.Owner = int(sys.Uid)
	}
	// systemd's own test (cg_is_delegated): the trusted xattr, or the user
	// one that a systemd without privileges can set.
	for _, name := range []string{"trusted.delegate", "user.delegate"} {
		buf := make([]byte, 8)
		if n, err := unix.Getxattr(dir, name, buf); err == nil && strings.TrimSpace(string(buf[:n])) == "1" {
			f.Delegated = true
			break
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers")); err == nil {
		f.Controllers = strings.Fields(string(b))
	}
	return f
}

// UseDelegation puts the runs' cgroups under the delegated subtree del
// (FindDelegation), where systemctl status and systemd-cgtop show them as
// the unit's and systemd's stop kills what a daemon left: it moves this
// process, and any other in the unit's own cgroup, into del.Leaf, enables
// the unit's controllers for its children, and makes del.Runs() the runs'
// parent. Call it instead of SetCgroupParent, before SetBudget, CleanStale
// and the first Run.
func (r *Runtime) UseDelegation(del Delegation) error {
	if err := CheckCgroupParent(del.Runs()); err != nil {
		return fmt.Errorf("use delegated cgroup: %w", err)
	}
	mount, err := cgroupMount("cgroup2", "")
	if err != nil {
		return fmt.Errorf("use delegated cgroup %s: %w", del.Unit, err)
	}
	if err := enterDelegation(mount, del); err != nil {
		return fmt.Errorf("use delegated cgroup %s: %w", del.Unit, err)
	}
	r.cgroupParent = del.Runs()
	return nil
}

// enterDelegation does UseDelegation's work on the cgroup2 tree at mount.
func enterDelegation(mount string, del Delegation) error {
	unit, leaf := filepath.Join(mount, del.Unit), filepath.Join(mount, del.Leaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := moveProcs(unit, leaf); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(mount, del.Runs()), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	// Only now, with no process left in the unit's cgroup, may it pass
	// controllers down; libcontainer and SetBudget enable them too, but
	// quietly, and a run without its memory controller would have no limit.
	b, err := os.ReadFile(filepath.Join(unit, "cgroup.controllers"))
	if err != nil {
		return err
	}
	if ctrls := strings.Fields(string(b)); len(ctrls) > 0 {
		if err := os.WriteFile(filepath.Join(unit, "cgroup.subtree_control"), []byte("+"+strings.Join(ctrls, " +")), 0); err != nil {
			return fmt.Errorf("enable %s for the unit's children: %w", strings.Join(ctrls, ", "), err)
		}
	}
	return nil
}

// moveProcs moves every process of cgroup from into cgroup to. A process
// forked while the list is read is found by the next pass.
func moveProcs(from, to string) error {
	for range 10 {
		b, err := os.ReadFile(filepath.Join(from, "cgroup.procs"))
		if err != nil {
			return err
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			if _, err := strconv.Atoi(pid); err != nil {
				continue
			}
			err := os.WriteFile(filepath.Join(to, "cgroup.procs"), []byte(pid), 0)
			if err != nil && !errors.Is(err, unix.ESRCH) { // ESRCH: it exited meanwhile
				return fmt.Errorf("move process %s into %s: %w", pid, to, err)
			}
		}
	}
	return fmt.Errorf("processes keep appearing in %s", from)
}
