package runner

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"kernelbox/gpu"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

// Slot is one GPU, or one share of the CPU backend, that runs one job at a
// time.
type Slot struct {
	ID      string // "cpu:0", or a GPU's UUID
	GPUType string // what leaderboards name: "cpu", "H200"
	Device  string
	// Cpuset pins the slot's runs to these CPUs ("0-7"); empty for all.
	Cpuset string
	// GPU is the slot's GPU; nil for a CPU slot.
	GPU *gpu.GPU
	// Mask are the other GPUs' /proc directories, hidden from its runs.
	Mask []string
	// Clocks is the slot's clock profile, stored with every score:
	// "locked 1500-1500 MHz", or "default" and why.
	Clocks string
}

// GPUSlots makes one slot per GPU: its runs get its device nodes, the CPUs
// of its NUMA node that the daemon may use (all of them when that leaves
// none) and none of the other GPUs' /proc entries.
func GPUSlots(inv gpu.Inventory, allowed []int) []Slot {
	var out []Slot
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		s := Slot{ID: g.UUID, GPUType: g.Type, Device: "cuda", GPU: g}
		if near, err := gpu.ParseCPUList(g.CPUs); err == nil {
			var ids []string
			for _, c := range near {
				if slices.Contains(allowed, c) {
					ids = append(ids, strconv.Itoa(c))
				}
			}
			s.Cpuset = strings.Join(ids, ",")
		}
		for _, o := range inv.GPUs {
			// MIG siblings share their parent's directory, which is theirs too.
			if o.ProcDir != "" && o.ProcDir != g.ProcDir && !slices.Contains(s.Mask, o.ProcDir) {
				s.Mask = append(s.Mask, o.ProcDir)
			}
		}
		out = append(out, s)
	}
	return out
}

// A gang is the slots one job runs on: one, or a multi-GPU problem's
// world_size, all of one type; the first leads (its ceilings and clocks are
// the run's).
type Gang []Slot

// IDs names the gang's slots, as runs record them: "A" or "A+B".
func (g Gang) IDs() string {
	ids := make([]string, len(g))
	for i, s := range g {
		ids[i] = s.ID
	}
	return strings.Join(ids, "+")
}

// Devices are the nodes a run in mode gets on the gang: its GPUs', and for
// profile mode the profiler's too (shared nodes once).
func (g Gang) Devices(mode problems.Mode) []sandbox.Device {
	var out []sandbox.Device
	seen := map[string]bool{}
	for _, s := range g {
		if s.GPU == nil {
			continue
		}
		nodes := s.GPU.Nodes
		if mode == problems.ModeProfile {
			nodes = append(append([]gpu.Node(nil), nodes...), s.GPU.ProfilingNodes...)
		}
		for _, n := range nodes {
			if !seen[n.Path] {
				seen[n.Path] = true
				out = append(out, sandbox.Device{Path: n.Path, Type: n.Type, Major: n.Major, Minor: n.Minor})
			}
		}
	}
	return out
}

// Env is what the gang adds to a run's environment: each variable once,
// its distinct values joined by commas in the gang's order
// (CUDA_VISIBLE_DEVICES=GPU-a,GPU-b, CUDA_DEVICE_ORDER=PCI_BUS_ID).
func (g Gang) Env() []string {
	var keys []string
	vals := map[string][]string{}
	for _, s := range g {
		if s.GPU == nil {
			continue
		}
		for _, kv := range s.GPU.VisibleEnv {
			k, v, _ := strings.Cut(kv, "=")
			if _, ok := vals[k]; !ok {
				keys = append(keys, k)
			}
			if !slices.Contains(vals[k], v) {
				vals[k] = append(vals[k], v)
			}
		}
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + strings.Join(vals[k], ",")
	}
	return out
}

// Mask are the /proc directories of the GPUs outside the gang.
func (g Gang) Mask() []string {
	var own, out []string
	for _, s := range g {
		if s.GPU != nil {
			own = append(own, s.GPU.ProcDir)
		}
	}
	for _, s := range g {
		for _, m := range s.Mask {
			if !slices.Contains(own, m) && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// Cpuset is the union of the slots' CPUs; empty (all) when one has none.
func (g Gang) Cpuset() string {
	var parts []string
	for _, s := range g {
		if s.Cpuset == "" {
			return ""
		}
		parts = append(parts, s.Cpuset)
	}
	return strings.Join(parts, ",")
}

// PickGang chooses k of the free slots for one job: for k > 1 the set whose
// pairs share the most NVLink/xGMI links, then a NUMA node, so that a
// multi-GPU run talks over the interconnect and not across sockets. The
// free slots come in the box's order, which breaks ties.
func PickGang(free []Slot, k int) Gang {
	if k <= 1 || k >= len(free) {
		return Gang(free[:min(max(k, 1), len(free))])
	}
	affinity := func(a, b Slot) int {
		if a.GPU == nil || b.GPU == nil {
			return 0
		}
		score := 4 * a.GPU.Links[b.GPU.UUID]
		if a.GPU.NUMANode >= 0 && a.GPU.NUMANode == b.GPU.NUMANode {
			score++
		}
		return score
	}
	var best Gang
	bestScore := -1
	for seed := range free {
		// Grow from each slot, adding the one closest to those taken.
		taken := Gang{free[seed]}
		used := map[int]bool{seed: true}
		score := 0
		for len(taken) < k {
			pick, pickScore := -1, -1
			for i, s := range free {
				if used[i] {
					continue
				}
				sc := 0
				for _, t := range taken {
					sc += affinity(s, t)
				}
				if sc > pickScore {
					pick, pickScore = i, sc
				}
			}
			used[pick] = true
			taken = append(taken, free[pick])
			score += pickScore
		}
		if score > bestScore {
			best, bestScore = taken, score
		}
	}
	return best
}

// CPUSlots are the CPU backend's slots. With at least as many CPUs as
// slots, each slot gets its own share of the CPUs (ids, as the daemon may
// use them): two runs at once would otherwise each start a thread per core
// and time each other.
func CPUSlots(n int, cpus []int) []Slot {
	var out []Slot
	per := len(cpus) / max(n, 1)
	for i := range n {
		s := Slot{ID: fmt.Sprintf("cpu:%d", i), GPUType: "cpu", Device: "cpu"}
		if per >= 1 {
			var ids []string
			for _, c := range cpus[i*per : (i+1)*per] {
				ids = append(ids, strconv.Itoa(c))
			}
			s.Cpuset = strings.Join(ids, ",")
		}
		out = append(out, s)
	}
	return out
}

// AllowedCPUs lists the CPUs this process may run on.
func AllowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		ids := make([]int, goruntime.NumCPU())
		for i := range ids {
			ids[i] = i
		}
		return ids
	}
	var ids []int
	for c := 0; len(ids) < set.Count() && c < 8192; c++ {
		if set.IsSet(c) {
			ids = append(ids, c)
		}
	}
	return ids
}
