//go:build linux

package sandbox

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
)

// runStats are read from the run's cgroup before it is destroyed.
type runStats struct {
	peak uint64
	cpu  time.Duration
	oom  uint64
}

// readStats reads peak memory, CPU time and OOM kills of the cgroup at path
// (relative to the cgroup root, the same in every v1 hierarchy), on either
// cgroup version. abs maps v1 controllers to the cgroup's directories, as
// libcontainer reports them; the v1 hierarchy root is found from them
// rather than assumed.
func readStats(path string, abs map[string]string) (runStats, error) {
	var st runStats
	if cgroups.Mode() == cgroups.Unified {
		m, err := cgroup2.Load(path)
		if err != nil {
			return st, err
		}
		metrics, err := m.Stat()
		if err != nil {
			return st, err
		}
		if metrics.Memory != nil {
			st.peak = metrics.Memory.MaxUsage
		}
		if metrics.MemoryEvents != nil {
			st.oom = metrics.MemoryEvents.OomKill
		}
		if metrics.CPU != nil {
			st.cpu = time.Duration(metrics.CPU.UsageUsec) * time.Microsecond
		}
		return st, nil
	}
	memDir, ok := abs["memory"]
	if !ok || !strings.HasSuffix(memDir, path) {
		return st, fmt.Errorf("no memory cgroup for %s in %v", path, abs)
	}
	// .../memory/<path> -> the directory holding the controllers' mounts.
	root := filepath.Dir(strings.TrimSuffix(memDir, path))
	// Only the controllers read here: the default hierarchy wants every v1
	// controller mounted, which hybrid hosts often do not have.
	hierarchy := func() ([]cgroup1.Subsystem, error) {
		return []cgroup1.Subsystem{cgroup1.NewMemory(root), cgroup1.NewCpuacct(root)}, nil
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(path), cgroup1.WithHierarchy(hierarchy))
	if err != nil {
		return st, err
	}
	metrics, err := cg.Stat(cgroup1.IgnoreNotExist)
	if err != nil {
		return st, err
	}
	if metrics.Memory != nil && metrics.Memory.Usage != nil {
		st.peak = metrics.Memory.Usage.Max
	}
	if metrics.MemoryOomControl != nil {
		st.oom = metrics.MemoryOomControl.OomKill
	}
	if metrics.CPU != nil && metrics.CPU.Usage != nil {
		st.cpu = time.Duration(metrics.CPU.Usage.Total)
	}
	return st, nil
}
