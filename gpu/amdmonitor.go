package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// NewAMDSysfs is the AMD backend of Monitor: the calls of the NVML
// interface, answered from amdgpu's sysfs files (hwmon, pp_dpm_sclk,
// mem_info, RAS) and the KFD's process list, so the gate, the sampling and
// the health check work the same on AMD. A clock lock is amdgpu's
// profile_standard performance level: fixed clocks the driver chooses for
// profiling, the AMD way to comparable timings. root is "/" (or empty) or
// a test tree.
func NewAMDSysfs(root string, gpus []GPU) NVML { return &amdLib{root: hostRoot(root), gpus: gpus} }

type amdLib struct {
	root string
	gpus []GPU
}

func (a *amdLib) Init() error     { return nil }
func (a *amdLib) Shutdown() error { return nil }

func (a *amdLib) DriverVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join(a.root, "sys/module/amdgpu/version"))
	return strings.TrimSpace(string(b)), err
}

func (a *amdLib) DeviceCount() (int, error) { return len(a.gpus), nil }

func (a *amdLib) Device(i int) (NVMLDevice, error) {
	if i < 0 || i >= len(a.gpus) {
		return nil, fmt.Errorf("no AMD GPU %d", i)
	}
	g := a.gpus[i]
	return &amdDevice{root: a.root, g: g, dir: filepath.Join(a.root, "sys/bus/pci/devices", g.PCI), kfdID: kfdGPUID(a.root, g.PCI)}, nil
}

// WatchXid: amdgpu has no Xid events; its RAS counters are read by Health.
func (a *amdLib) WatchXid() (XidEvents, error) { return nil, ErrNotSupported }

type amdDevice struct {
	root, dir string
	g         GPU
	kfdID     string // the KFD's gpu_id, which names the GPU in its process list
}

func (d *amdDevice) Name() (string, error)        { return d.g.Name, nil }
func (d *amdDevice) UUID() (string, error)        { return d.g.UUID, nil }
func (d *amdDevice) Minor() (int, error)          { return d.g.Index, nil }
func (d *amdDevice) MemoryTotal() (uint64, error) { return d.g.Memory, nil }
func (d *amdDevice) PCIBusID() (string, error)    { return d.g.PCI, nil }
func (d *amdDevice) NUMANode() (int, error)       { return d.g.NUMANode, nil }

// hwmon reads the first of names in the GPU's hwmon directory.
func (d *amdDevice) hwmon(names ...string) (uint64, error) {
	dirs, _ := filepath.Glob(filepath.Join(d.dir, "hwmon", "hwmon*"))
	for _, h := range dirs {
		for _, n := range names {
			if v, err := readUint(filepath.Join(h, n)); err == nil {
				return v, nil
			}
		}
	}
	return 0, ErrNotSupported
}

func (d *amdDevice) Temperature() (uint32, error) {
	v, err := d.hwmon("temp2_input", "temp1_input") // junction, else edge; millidegrees
	return uint32(v / 1000), err
}

func (d *amdDevice) Power() (uint32, error) {
	v, err := d.hwmon("power1_average", "power1_input") // µW
	return uint32(v / 1000), err
}

// sclk reads pp_dpm_sclk: "0: 500Mhz", "1: 2100Mhz *", the current level
// starred.
func (d *amdDevice) sclk() (cur, top uint32, err error) {
	b, err := os.ReadFile(filepath.Join(d.dir, "pp_dpm_sclk"))
	if err != nil {
		return 0, 0, ErrNotSupported
	}
	for _, line := range strings.Split(string(b), "\n") {
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		mhz, err := strconv.ParseUint(strings.TrimSuffix(strings.ToLower(f[0]), "mhz"), 10, 32)
		if err != nil {
			continue
		}
		top = max(top, uint32(mhz))
		if len(f) > 1 && f[1] == "*" {
			cur = uint32(mhz)
		}
	}
	return cur, top, nil
}

func (d *amdDevice) SMClock() (uint32, error) {
	c, _, err := d.sclk()
	return c, err
}

func (d *amdDevice) MaxSMClock() (uint32, error) {
	_, t, err := d.sclk()
	return t, err
}

// ClockEventReasons: amdgpu's throttle status is in the binary gpu_metrics
// table, not read here.
func (d *amdDevice) ClockEventReasons() (uint64, error) { return 0, ErrNotSupported }

func (d *amdDevice) MemoryUsed() (uint64, error) {
	return readUint(filepath.Join(d.dir, "mem_info_vram_used"))
}

// ComputeProcesses lists the processes the KFD says hold memory on this
// GPU (/sys/class/kfd/kfd/proc/PID/vram_GPUID).
func (d *amdDevice) ComputeProcesses() ([]uint32, error) {
	if d.kfdID == "" {
		return nil, ErrNotSupported
	}
	dirs, err := os.ReadDir(filepath.Join(d.root, "sys/class/kfd/kfd/proc"))
	if err != nil {
		return nil, ErrNotSupported
	}
	var out []uint32
	for _, e := range dirs {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d.root, "sys/class/kfd/kfd/proc", e.Name(), "vram_"+d.kfdID)); err == nil {
			out = append(out, uint32(pid))
		}
	}
	return out, nil
}

const amdLevel = "power_dpm_force_performance_level"

// SetLockedClocks sets profile_standard; amdgpu picks the clocks, so the
// MHz asked for are not applied (the daemon says so).
func (d *amdDevice) SetLockedClocks(_, _ uint32) error {
	return os.WriteFile(filepath.Join(d.dir, amdLevel), []byte("profile_standard\n"), 0)
}

func (d *amdDevice) ResetLockedClocks() error {
	return os.WriteFile(filepath.Join(d.dir, amdLevel), []byte("auto\n"), 0)
}

// LockHolds says whether profile_standard is still set: the clock itself
// says nothing, as the driver chose it.
func (d *amdDevice) LockHolds() (bool, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, amdLevel))
	return strings.TrimSpace(string(b)) == "profile_standard", err
}

// ECCUncorrected reads the memory controller's RAS count ("ue: N").
func (d *amdDevice) ECCUncorrected() (uint64, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, "ras", "umc_err_count"))
	if err != nil {
		return 0, ErrNotSupported
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "ue" {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, ErrNotSupported
}

func (d *amdDevice) RemappedRows() (RemappedRows, error) { return RemappedRows{}, ErrNotSupported }

func (d *amdDevice) Violations() (uint64, uint64, error) { return 0, 0, ErrNotSupported }

// kfdGPUID finds the KFD topology node of a PCI address and returns its
// gpu_id.
func kfdGPUID(root, pci string) string {
	nodes, _ := filepath.Glob(filepath.Join(root, "sys/class/kfd/kfd/topology/nodes/*"))
	for _, n := range nodes {
		props, err := keyValues(filepath.Join(n, "properties"))
		if err != nil || props["drm_render_minor"] <= 0 {
			continue
		}
		if kfdPCI(props) != pci {
			continue
		}
		b, err := os.ReadFile(filepath.Join(n, "gpu_id"))
		if err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// MIGDevices: AMD partitions (CPX/NPS modes) appear as KFD nodes of their
// own, which discovery already lists.
func (d *amdDevice) MIGDevices() ([]MIGDevice, error) { return nil, nil }

// NVLinkPeers: xGMI links are not read yet; AMD GPUs are picked by NUMA node.
func (d *amdDevice) NVLinkPeers() ([]string, error) { return nil, nil }
