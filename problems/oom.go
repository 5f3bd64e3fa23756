package problems

import (
	"fmt"
	"slices"
	"strings"
)

// KilledProcess is a process the kernel killed for memory.
type KilledProcess struct {
	Name string
	PID  int    // the host's pid, not the one the run saw
	RSS  uint64 // bytes resident when it was killed; 0 if unknown
	// Budget: killed for the memory budget shared by all runs, not for
	// the run's own limit.
	Budget bool
}

// describeOOM says why an Outcome with OOM set failed: which process the
// kernel killed and what it held, the limit it was killed at, and the
// run's peak, as far as the launcher knows them.
func describeOOM(out Outcome) string {
	var b strings.Builder
	b.WriteString("ran out of memory: the kernel killed ")
	if len(out.OOMKilled) == 0 {
		b.WriteString("a process of the run")
	} else {
		k := out.OOMKilled[0]
		fmt.Fprintf(&b, "%s (pid %d on the host", k.Name, k.PID)
		if k.RSS > 0 {
			fmt.Fprintf(&b, ", holding %s", formatBytes(k.RSS))
		}
		b.WriteString(")")
		if n := len(out.OOMKilled) - 1; n > 0 {
			fmt.Fprintf(&b, " and %d more", n)
		}
	}
	switch {
	case slices.ContainsFunc(out.OOMKilled, func(k KilledProcess) bool { return k.Budget }):
		// Not the run's own limit: other runs held the memory too.
		b.WriteString(" at the memory budget the box shares among its runs")
	case out.MemoryLimit > 0:
		fmt.Fprintf(&b, " at the run's %s memory limit", formatBytes(out.MemoryLimit))
	default:
		b.WriteString(" at the memory limit")
	}
	if out.PeakMemory > 0 {
		fmt.Fprintf(&b, " (the run's peak: %s)", formatBytes(out.PeakMemory))
	}
	return b.String()
}

// formatBytes writes a size in MiB, or GiB from 1 GiB up.
func formatBytes(n uint64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}
