package gpu

import (
	"context"
	"regexp"
	"strings"
)

// Vendor says which backend found a GPU.
type Vendor string

// The backends.
const (
	VendorNVIDIA Vendor = "nvidia"
	VendorAMD    Vendor = "amd"
	VendorNone   Vendor = "none" // no GPU: the CPU backend
)

// Node is a device node a run needs, with its numbers, so the sandbox can
// create it and allow it in the device cgroup.
type Node struct {
	Path  string `json:"path"`
	Type  rune   `json:"type"` // 'c'
	Major int64  `json:"major"`
	Minor int64  `json:"minor"`
}

// GPU is one GPU of the box.
type GPU struct {
	Index  int    `json:"index"`
	UUID   string `json:"uuid"`
	Name   string `json:"name"` // as the driver says it: "NVIDIA H200"
	Type   string `json:"type"` // as leaderboards say it: "H200"
	Vendor Vendor `json:"vendor"`
	Memory uint64 `json:"memory_bytes"`
	PCI    string `json:"pci_bus_id"` // 0000:00:06.0
	// NUMANode is the GPU's NUMA node, -1 when the platform does not say.
	NUMANode int `json:"numa_node"`
	// CPUs are the CPUs of that NUMA node, as a cpuset ("0-15"); empty when unknown.
	CPUs string `json:"cpus,omitempty"`
	// Nodes are what a run on this GPU gets; ProfilingNodes are added for
	// profile mode (nvidia-uvm-tools).
	Nodes          []Node `json:"nodes"`
	ProfilingNodes []Node `json:"profiling_nodes,omitempty"`
	// ProcDir is the driver's /proc directory of this GPU, which runs on
	// other GPUs must not see (/proc/driver/nvidia/gpus/BUS).
	ProcDir string `json:"proc_dir,omitempty"`
	// VisibleEnv names the GPU for the runtime inside the sandbox, for
	// convenience only: the boundary is the device nodes.
	VisibleEnv []string `json:"visible_env,omitempty"`
	// Parent is the physical GPU's UUID when this is a MIG instance. Its
	// clocks, temperature and power are the parent's, shared with its
	// sibling instances.
	Parent string `json:"parent,omitempty"`
	// Links counts the NVLink (or xGMI) links to each peer GPU, by UUID:
	// a multi-GPU job's GPUs are picked to share them.
	Links map[string]int `json:"links,omitempty"`
}

// Inventory is what Discover found.
type Inventory struct {
	Vendor Vendor `json:"vendor"`
	Driver string `json:"driver,omitempty"`
	GPUs   []GPU  `json:"gpus"`
	// Notes say why a backend found nothing ("no NVIDIA driver: ..."),
	// for `kernelbox doctor` and the daemon's log.
	Notes []string `json:"notes,omitempty"`
}

// Options tune Discover; the zero value looks at the real host.
type Options struct {
	// NVML is the NVIDIA library; the real one (go-nvml) when nil.
	NVML NVML
	// Root is the host's filesystem root for sysfs, /proc and /dev ("/"
	// when empty); tests point it at a tree in testdata.
	Root string
	// Aliases rename GPU types: a GPU name or a derived type maps to the
	// type leaderboards use ("NVIDIA H100 80GB HBM3": "H100-SXM").
	Aliases map[string]string
}

// hostRoot is the filesystem root a root argument names: "/" when empty.
func hostRoot(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

// Discover lists the box's GPUs: NVIDIA first, then AMD; with neither, an
// empty inventory of vendor none and notes that say why. It never fails:
// a missing driver is a finding, not an error.
func Discover(ctx context.Context, opt Options) Inventory {
	opt.Root = hostRoot(opt.Root)
	if opt.NVML == nil {
		opt.NVML = NewNVML()
	}
	var notes []string
	inv, err := discoverNVIDIA(ctx, opt)
	if err == nil && len(inv.GPUs) > 0 {
		return inv
	}
	if err != nil {
		notes = append(notes, "NVIDIA: "+err.Error())
	} else {
		notes = append(notes, "NVIDIA: the driver answers but lists no GPU")
	}
	inv, err = discoverAMD(opt)
	if err == nil && len(inv.GPUs) > 0 {
		return inv
	}
	if err != nil {
		notes = append(notes, "AMD: "+err.Error())
	} else {
		notes = append(notes, "AMD: the amdgpu driver is loaded but KFD lists no GPU")
	}
	return Inventory{Vendor: VendorNone, GPUs: []GPU{}, Notes: notes}
}

var (
	typeRE   = regexp.MustCompile(`^[A-Za-z]+[0-9]+[A-Za-z]*$`)
	prefixes = []string{"NVIDIA ", "Tesla ", "AMD ", "Instinct ", "Radeon ", "Quadro ", "GeForce "}
)

// TypeOf derives the GPU type leaderboards use from the driver's name:
// "NVIDIA H200" → H200, "NVIDIA H100 80GB HBM3" → H100, "NVIDIA
// A100-SXM4-40GB" → A100, "AMD Instinct MI300X" → MI300X, "NVIDIA GeForce
// RTX 4090" → RTX4090. An alias for the name or the type wins.
func TypeOf(name string, aliases map[string]string) string {
	if a, ok := aliases[name]; ok {
		return a
	}
	rest := strings.TrimSpace(name)
	for changed := true; changed; {
		changed = false
		for _, p := range prefixes {
			if strings.HasPrefix(rest, p) {
				rest, changed = strings.TrimSpace(rest[len(p):]), true
			}
		}
	}
	fields := strings.Fields(rest)
	t := rest
	switch {
	case len(fields) == 0:
		t = name
	case len(fields) >= 2 && (fields[0] == "RTX" || fields[0] == "GTX") && typeRE.MatchString(fields[0]+fields[1]):
		t = fields[0] + fields[1]
	default:
		t, _, _ = strings.Cut(fields[0], "-")
	}
	if a, ok := aliases[t]; ok {
		return a
	}
	return t
}
