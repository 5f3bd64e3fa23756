package gpu

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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
		inv.GPUs = append(inv.GPUs, g)
	}
	return inv, nil
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
