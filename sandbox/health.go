//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3"
)

// Check is one finding about whether this host can run sandboxes.
type Check struct {
	Name string
	OK   bool
	Info string // what was found
	Fix  string // what to do when not OK
}

// HostChecks reports what the sandbox needs of the host: root, cgroups
// with the controllers it limits, seccomp in the kernel and in this build,
// and namespaces.
func HostChecks() []Check {
	var out []Check
	root := os.Geteuid() == 0
	out = append(out, Check{Name: "root", OK: root, Info: fmt.Sprintf("euid %d", os.Geteuid()),
		Fix: "run kernelbox as root (the daemon's systemd unit does)"})

	mode := map[cgroups.CGMode]string{cgroups.Legacy: "v1", cgroups.Hybrid: "v1 (hybrid)", cgroups.Unified: "v2", cgroups.Unavailable: "none"}[cgroups.Mode()]
	out = append(out, Check{Name: "cgroups", OK: cgroups.Mode() != cgroups.Unavailable, Info: mode,
		Fix: "mount cgroup v2 at /sys/fs/cgroup (or the v1 controllers)"})
	missing := missingControllers()
	out = append(out, Check{Name: "cgroup controllers", OK: len(missing) == 0,
		Info: "memory, pids, cpu, cpuset" + missingText(missing),
		Fix:  "enable the missing controllers (cgroup v2: in the root's cgroup.subtree_control)"})

	status, _ := os.ReadFile("/proc/self/status")
	kernelSeccomp := strings.Contains(string(status), "\nSeccomp:")
	out = append(out, Check{Name: "seccomp (kernel)", OK: kernelSeccomp, Info: yesNo(kernelSeccomp),
		Fix: "use a kernel built with CONFIG_SECCOMP_FILTER"})
	out = append(out, Check{Name: "seccomp (this build)", OK: seccompBuilt, Info: yesNo(seccompBuilt),
		Fix: "rebuild with cgo, libseccomp-dev and -tags seccomp (make build does)"})

	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		_, err := os.Stat("/proc/self/ns/" + ns)
		out = append(out, Check{Name: ns + " namespace", OK: err == nil, Info: yesNo(err == nil),
			Fix: "use a kernel with " + ns + " namespaces"})
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		// Not needed by the sandbox (it runs as root without a user
		// namespace); reported because tools inside may look for it.
		out = append(out, Check{Name: "user namespaces", OK: true, Info: fmt.Sprintf("max %d (not required)", n)})
	}
	return out
}

func missingControllers() []string {
	var missing []string
	if cgroups.Mode() == cgroups.Unified {
		mount, err := cgroupMount("cgroup2", "")
		if err != nil {
			return []string{"cgroup2 mount"}
		}
		b, _ := os.ReadFile(mount + "/cgroup.controllers")
		have := strings.Fields(string(b))
		for _, c := range []string{"memory", "pids", "cpu", "cpuset"} {
			if !contains(have, c) {
				missing = append(missing, c)
			}
		}
		return missing
	}
	for _, c := range []string{"memory", "pids", "cpu", "cpuset"} {
		if _, err := cgroupMount("cgroup", c); err != nil {
			missing = append(missing, c)
		}
	}
	return missing
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func missingText(m []string) string {
	if len(m) == 0 {
		return ""
	}
	return "; missing: " + strings.Join(m, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// SeccompBuilt reports whether this binary can load seccomp filters: without
// it NewRuntime refuses, and callers' tests skip.
func SeccompBuilt() bool { return seccompBuilt }
