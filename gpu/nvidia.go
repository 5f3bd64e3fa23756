package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNotSupported is what an NVML call answers on a GPU that lacks the
// feature (power on some boards, MIG on most): a value to do without, not
// a failure.
var ErrNotSupported = errors.New("not supported by this GPU")

// NVML is the part of the NVIDIA management library kernelbox uses, one
// method per call, so that everything above it is tested against a fake
// (gputest.NVML) and the real library is only this thin adapter.
type NVML interface {
	Init() error
	Shutdown() error
	DriverVersion() (string, error)
	DeviceCount() (int, error)
	Device(index int) (NVMLDevice, error)
	// WatchXid registers for the critical Xid events of every GPU.
	WatchXid() (XidEvents, error)
}

// XidEvents is NVML's event set for Xid errors.
type XidEvents interface {
	// Wait returns the next event, or ErrNoEvent after timeout.
	Wait(timeout time.Duration) (uuid string, xid uint64, err error)
	Close() error
}

// ErrNoEvent is XidEvents.Wait's answer when no event came in time.
var ErrNoEvent = errors.New("no event")

// MIGDevice is one MIG instance (a GPU instance and its compute instance).
type MIGDevice struct {
	UUID   string // MIG-...
	Name   string // NVIDIA H200 MIG 1g.18gb
	Memory uint64
	GI, CI int // the GPU and compute instance ids, which name its capability nodes
}

// RemappedRows is the memory row remapping state of a GPU (Ampere on).
type RemappedRows struct {
	Correctable, Uncorrectable int
	Pending                    bool // a remapping waits for a GPU reset
	Failed                     bool // a remapping failed: the GPU needs service
}

// NVMLDevice is one GPU as NVML sees it.
type NVMLDevice interface {
	Name() (string, error)
	UUID() (string, error)
	Minor() (int, error)
	MemoryTotal() (uint64, error)
	PCIBusID() (string, error)
	NUMANode() (int, error)

	// Telemetry and control, for the fair-measurement gate.
	Temperature() (uint32, error)       // °C
	SMClock() (uint32, error)           // MHz now
	MaxSMClock() (uint32, error)        // MHz
	Power() (uint32, error)             // mW
	ClockEventReasons() (uint64, error) // the throttle bitmask
	MemoryUsed() (uint64, error)
	ComputeProcesses() ([]uint32, error) // host pids
	SetLockedClocks(minMHz, maxMHz uint32) error
	ResetLockedClocks() error

	// MIGDevices lists the GPU's MIG instances; none (and no error) when
	// MIG is off or the GPU has no MIG.
	MIGDevices() ([]MIGDevice, error)
	// NVLinkPeers are the PCI bus ids of the GPUs at the far end of the
	// active NVLinks, one entry a link; none without NVLink, and none for
	// links to an NVSwitch (where every GPU reaches every other alike).
	NVLinkPeers() ([]string, error)

	// Health, between jobs.
	ECCUncorrected() (uint64, error) // volatile count, since the driver loaded
	// Violations are the cumulative ns the GPU spent held back by its
	// thermal and its power policy.
	Violations() (thermalNs, powerNs uint64, err error)
	RemappedRows() (RemappedRows, error)
}

func discoverNVIDIA(_ context.Context, opt Options) (Inventory, error) {
	lib := opt.NVML
	if err := lib.Init(); err != nil {
		return Inventory{}, fmt.Errorf("no usable NVIDIA driver (%w)", err)
	}
	defer lib.Shutdown()
	inv := Inventory{Vendor: VendorNVIDIA, GPUs: []GPU{}}
	inv.Driver, _ = lib.DriverVersion()
	n, err := lib.DeviceCount()
	if err != nil {
		return Inventory{}, fmt.Errorf("count GPUs: %w", err)
	}
	devices, err := procDevices(opt.Root)
	if err != nil {
		return Inventory{}, err
	}
	ctl, err := charNode(opt.Root, "/dev/nvidiactl", devices["nvidia-frontend"], 255)
	if err != nil {
		return Inventory{}, err
	}
	// nvidia-uvm's major is dynamic, and its node may not exist yet (the
	// driver creates it on first use): /proc/devices has the number.
	uvm, err := charNode(opt.Root, "/dev/nvidia-uvm", devices["nvidia-uvm"], 0)
	if err != nil {
		return Inventory{}, err
	}
	uvmTools, uvmToolsErr := charNode(opt.Root, "/dev/nvidia-uvm-tools", devices["nvidia-uvm"], 1)
	peers := map[string][]string{} // UUID -> the PCI ids its links reach
	for i := range n {
		d, err := lib.Device(i)
		if err != nil {
			return Inventory{}, fmt.Errorf("GPU %d: %w", i, err)
		}
		g := GPU{Index: i, Vendor: VendorNVIDIA, NUMANode: -1}
		if g.Name, err = d.Name(); err != nil {
			return Inventory{}, fmt.Errorf("GPU %d name: %w", i, err)
		}
		if g.UUID, err = d.UUID(); err != nil {
			return Inventory{}, fmt.Errorf("GPU %d UUID: %w", i, err)
		}
		minor, err := d.Minor()
		if err != nil {
			return Inventory{}, fmt.Errorf("GPU %d minor number: %w", i, err)
		}
		g.Type = TypeOf(g.Name, opt.Aliases)
		g.Memory, _ = d.MemoryTotal()
		if bus, err := d.PCIBusID(); err == nil {
			g.PCI = normalPCI(bus)
			g.ProcDir = "/proc/driver/nvidia/gpus/" + g.PCI
		}
		if numa, err := d.NUMANode(); err == nil && numa >= 0 {
			g.NUMANode = numa
		} else if g.PCI != "" {
			g.NUMANode = pciNUMANode(opt.Root, g.PCI)
		}
		g.CPUs = nodeCPUs(opt.Root, g.NUMANode)
		dev, err := charNode(opt.Root, fmt.Sprintf("/dev/nvidia%d", minor), devices["nvidia-frontend"], int64(minor))
		if err != nil {
			return Inventory{}, fmt.Errorf("GPU %d: %w", i, err)
		}
		g.Nodes = []Node{dev, ctl, uvm}
		if uvmToolsErr == nil {
			g.ProfilingNodes = []Node{uvmTools}
		}
		g.VisibleEnv = []string{"CUDA_VISIBLE_DEVICES=" + g.UUID, "CUDA_DEVICE_ORDER=PCI_BUS_ID"}
		migs, err := d.MIGDevices()
		if err != nil && !errors.Is(err, ErrNotSupported) {
			return Inventory{}, fmt.Errorf("GPU %d MIG instances: %w", i, err)
		}
		// The topology only picks a multi-GPU job's GPUs: without it they
		// are picked by NUMA node alone.
		if p, err := d.NVLinkPeers(); err == nil {
			peers[g.UUID] = p
		}
		if len(migs) == 0 {
			g.Index = len(inv.GPUs)
			inv.GPUs = append(inv.GPUs, g)
			continue
		}
		// With MIG on, the instances are the GPUs: the whole one is not
		// offered beside them.
		for _, mi := range migs {
			mg, err := migGPU(opt, devices, g, minor, mi)
			if err != nil {
				return Inventory{}, fmt.Errorf("GPU %d MIG %s: %w", i, mi.UUID, err)
			}
			mg.Index = len(inv.GPUs)
			inv.GPUs = append(inv.GPUs, mg)
		}
	}
	linkGPUs(inv.GPUs, peers)
	return inv, nil
}

// linkGPUs counts each GPU's links to each other (whole) GPU, from the PCI
// ids its links reach.
func linkGPUs(gpus []GPU, peers map[string][]string) {
	byPCI := map[string]string{}
	for _, g := range gpus {
		if g.Parent == "" && g.PCI != "" {
			byPCI[g.PCI] = g.UUID
		}
	}
	for i := range gpus {
		g := &gpus[i]
		if g.Parent != "" {
			continue
		}
		for _, pci := range peers[g.UUID] {
			if peer, ok := byPCI[normalPCI(pci)]; ok && peer != g.UUID {
				if g.Links == nil {
					g.Links = map[string]int{}
				}
				g.Links[peer]++
			}
		}
	}
}

// migGPU is a MIG instance as a GPU of its own: the parent's nodes plus
// the capability nodes of its GPU and compute instance
// (/proc/driver/nvidia-caps/mig-minors names their minors), as NVIDIA's
// container toolkit gives a container.
func migGPU(opt Options, devices map[string]int64, parent GPU, minor int, mi MIGDevice) (GPU, error) {
	g := parent
	g.UUID, g.Name, g.Memory, g.Parent = mi.UUID, mi.Name, mi.Memory, parent.UUID
	profile := mi.Name
	if _, p, ok := strings.Cut(mi.Name, " MIG "); ok {
		profile = p
	}
	g.Type = TypeOf(parent.Name, opt.Aliases) + "-MIG-" + profile
	if t, ok := opt.Aliases[mi.Name]; ok {
		g.Type = t
	}
	minors, err := migMinors(opt.Root)
	if err != nil {
		return GPU{}, err
	}
	g.Nodes = append([]Node(nil), parent.Nodes...)
	for _, key := range []string{fmt.Sprintf("gpu%d/gi%d/access", minor, mi.GI), fmt.Sprintf("gpu%d/gi%d/ci%d/access", minor, mi.GI, mi.CI)} {
		m, ok := minors[key]
		if !ok {
			return GPU{}, fmt.Errorf("no %s in /proc/driver/nvidia-caps/mig-minors", key)
		}
		n, err := charNode(opt.Root, fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", m), devices["nvidia-caps"], m)
		if err != nil {
			return GPU{}, err
		}
		g.Nodes = append(g.Nodes, n)
	}
	g.VisibleEnv = []string{"CUDA_VISIBLE_DEVICES=" + g.UUID}
	return g, nil
}

// migMinors reads the driver's table of MIG capability minors: lines like
// "gpu0/gi1/ci0/access 14".
func migMinors(root string) (map[string]int64, error) {
	b, err := os.ReadFile(filepath.Join(root, "proc/driver/nvidia-caps/mig-minors"))
	if err != nil {
		return nil, fmt.Errorf("MIG capability minors: %w", err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			out[f[0]] = n
		}
	}
	return out, nil
}

// normalPCI writes a bus id as the kernel does, 0000:00:06.0: NVML gives
// 00000000:00:06.0, upper case.
func normalPCI(bus string) string {
	bus = strings.ToLower(strings.TrimRight(bus, "\x00"))
	if dom, rest, ok := strings.Cut(bus, ":"); ok && len(dom) > 4 {
		bus = dom[len(dom)-4:] + ":" + rest
	}
	return bus
}

func pciNUMANode(root, pci string) int {
	n, err := readInt(filepath.Join(root, "sys/bus/pci/devices", pci, "numa_node"))
	if err != nil {
		return -1
	}
	return int(n)
}
