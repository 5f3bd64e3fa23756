//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Budget bounds all the runtime's sandboxes together, so that however many
// run at once the daemon and the host stay responsive. Zero fields are
// unlimited.
type Budget struct {
	Memory int64   // bytes
	CPUs   float64 // cores
	Pids   int64
}

// SetBudget creates (or updates) the parent cgroup every run's cgroup is
// made under, with the budget's limits. libcontainer owns each run's own
// cgroup; this one is ours, managed through containerd/cgroups.
func (r *Runtime) SetBudget(b Budget) error {
	r.budget = b
	period := uint64(100000)
	var quota *int64
	if b.CPUs > 0 {
		q := int64(b.CPUs * float64(period))
		quota = &q
	}
	group := "/" + r.cgroupParent
	if cgroups.Mode() == cgroups.Unified {
		mount, err := cgroupMount("cgroup2", "")
		if err != nil {
			return fmt.Errorf("set sandbox budget: %w", err)
		}
		res := &cgroup2.Resources{Pids: &cgroup2.Pids{Max: b.Pids}}
		if b.Memory > 0 {
			res.Memory = &cgroup2.Memory{Max: &b.Memory}
		}
		if quota != nil {
			res.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(quota, &period)}
		}
		if _, err := cgroup2.NewManager(mount, group, res); err != nil {
			return fmt.Errorf("set sandbox budget on %s: %w", group, err)
		}
		return nil
	}
	memMount, err := cgroupMount("cgroup", "memory")
	if err != nil {
		return fmt.Errorf("set sandbox budget: %w", err)
	}
	root := filepath.Dir(memMount)
	res := &specs.LinuxResources{}
	if b.Memory > 0 {
		// RAM only: each run's own cgroup already forbids swap, and a
		// memsw limit here would have to be raised before the limit on
		// every increase.
		res.Memory = &specs.LinuxMemory{Limit: &b.Memory}
	}
	if quota != nil {
		res.CPU = &specs.LinuxCPU{Quota: quota, Period: &period}
	}
	if b.Pids > 0 {
		res.Pids = &specs.LinuxPids{Limit: &b.Pids}
	}
	hierarchy := func() ([]cgroup1.Subsystem, error) {
		return []cgroup1.Subsystem{cgroup1.NewMemory(root), cgroup1.NewCpu(root), cgroup1.NewPids(root)}, nil
	}
	if cg, err := cgroup1.Load(cgroup1.StaticPath(group), cgroup1.WithHierarchy(hierarchy)); err == nil {
		if err := cg.Update(res); err != nil {
			return fmt.Errorf("update sandbox budget on %s: %w", group, err)
		}
		return nil
	}
	if _, err := cgroup1.New(cgroup1.StaticPath(group), res, cgroup1.WithHierarchy(hierarchy)); err != nil {
		return fmt.Errorf("set sandbox budget on %s: %w", group, err)
	}
	return nil
}

// cgroupMount finds where a cgroup filesystem is mounted: the cgroup2 tree,
// or the v1 hierarchy holding controller.
//
// It reads the calling thread's mount table, not /proc/self's: libcontainer
// enters a container's mount namespace on a locked thread, and when that
// thread is the process's main thread Go can never retire it, so
// /proc/self/mountinfo (the main thread's view) can show a container's
// mounts from then on (seen in CI).
func cgroupMount(fstype, controller string) (string, error) {
	point := ""
	err := eachMount(func(mountPoint, fs, _, superOpts string) bool {
		if fs != fstype {
			return true
		}
		if controller == "" || slices.Contains(strings.Split(superOpts, ","), controller) {
			point = mountPoint
			return false
		}
		return true
	})
	if err != nil {
		return "", err
	}
	if point != "" {
		return point, nil
	}
	return "", fmt.Errorf("no %s mount with %q in the mount table", fstype, controller)
}

// eachMount calls fn with every mount of this thread's mount namespace
// (mount point, filesystem type, source, super options) until fn returns
// false. It reads /proc/thread-self on a locked thread, for the reason
// cgroupMount gives.
func eachMount(fn func(point, fstype, source, superOpts string) bool) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 {
			continue
		}
		if !fn(fields[4], tail[0], tail[1], tail[2]) {
			return nil
		}
	}
	return sc.Err()
}

// parentDirs lists the directories of the cgroup parent that exist: in the
// cgroup2 tree, or in every v1 hierarchy (and the hybrid's cgroup2 tree
// beside them), which libcontainer makes a run's cgroup in.
func parentDirs(parent string) ([]string, error) {
	if cgroups.Mode() == cgroups.Unified {
		m, err := cgroupMount("cgroup2", "")
		if err != nil {
			return nil, err
		}
		if st, err := os.Stat(filepath.Join(m, parent)); err != nil || !st.IsDir() {
			return nil, nil
		}
		return []string{filepath.Join(m, parent)}, nil
	}
	m, err := cgroupMount("cgroup", "memory")
	if err != nil {
		return nil, err
	}
	root := filepath.Dir(m)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range entries {
		// Not a link: cpu -> cpu,cpuacct is the same hierarchy again.
		if !e.IsDir() {
			continue
		}
		d := filepath.Join(root, e.Name(), parent)
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return dirs, nil
}

// runCgroups lists the run cgroups under the runtime's parent, by run id,
// with their directory in every hierarchy that has one.
func (r *Runtime) runCgroups() (map[string][]string, error) {
	parents, err := parentDirs(r.cgroupParent)
	if err != nil {
		return nil, err
	}
	found := map[string][]string{}
	for _, p := range parents {
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), idPrefix) {
				found[e.Name()] = append(found[e.Name()], filepath.Join(p, e.Name()))
			}
		}
	}
	return found, nil
}

// removeCgroupParent removes the parent cgroup from every hierarchy, where
// it is empty: a run cgroup still in it (a run that has not ended, or one
// whose Destroy failed) keeps it, and is the error.
func removeCgroupParent(parent string) error {
	dirs, err := parentDirs(parent)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err) // "remove DIR: device or resource busy"
		}
	}
	return errors.Join(errs...)
}

// removeOrphanCgroups removes the empty run cgroups no container state
// accounts for: what a run left when its Destroy failed, or when the
// runtime's tmpfs went away with the state while the cgroups stayed. A
// cgroup with processes is left alone and logged: it may be another
// runtime's live run.
func (r *Runtime) removeOrphanCgroups() {
	found, err := r.runCgroups()
	if err != nil {
		r.logger.Warn("list run cgroups", "err", err)
		return
	}
	for id, dirs := range found {
		if _, err := os.Stat(filepath.Join(r.root, "state", id)); err == nil {
			continue
		}
		for _, d := range dirs {
			if procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs")); len(strings.TrimSpace(string(procs))) > 0 {
				r.logger.Warn("run cgroup without state still has processes", "cgroup", d)
				continue
			}
			if err := os.Remove(d); err != nil {
				r.logger.Warn("remove orphan run cgroup", "cgroup", d, "err", err)
			}
		}
	}
}

// SetCgroupParent names the cgroup every run's cgroup is made under, a
// path from the root of every hierarchy (DefaultCgroupParent of the
// runtime's root unless set). Two runtimes with different parents never
// touch each other's cgroups, not even in CleanStale's sweep of orphans or
// in Close, which removes the parent: so one parent is one runtime's. Call
// it before SetBudget, CleanStale and the first Run.
func (r *Runtime) SetCgroupParent(name string) error {
	if err := CheckCgroupParent(name); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	r.cgroupParent = name
	return nil
}

// CgroupParent is the cgroup the runs' cgroups are made under, relative to
// the root of every hierarchy.
func (r *Runtime) CgroupParent() string { return r.cgroupParent }
