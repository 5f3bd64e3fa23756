package gpu

import (
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NewNVML returns the real NVIDIA library. Nothing is loaded until Init,
// which fails cleanly (library not found) on a host without the driver;
// the binary must be linked with lazy binding (-z lazy, see the Makefile).
func NewNVML() NVML { return &realNVML{lib: nvml.New()} }

type realNVML struct{ lib nvml.Interface }

// nvmlErr turns a return code into an error, nil on success.
func (n *realNVML) nvmlErr(r nvml.Return) error {
	switch r {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_NOT_SUPPORTED:
		return ErrNotSupported
	}
	return fmt.Errorf("nvml: %s", n.lib.ErrorString(r))
}

func (n *realNVML) Init() error     { return n.nvmlErr(n.lib.Init()) }
func (n *realNVML) Shutdown() error { return n.nvmlErr(n.lib.Shutdown()) }

func (n *realNVML) DriverVersion() (string, error) {
	v, r := n.lib.SystemGetDriverVersion()
	return v, n.nvmlErr(r)
}

func (n *realNVML) DeviceCount() (int, error) {
	c, r := n.lib.DeviceGetCount()
	return c, n.nvmlErr(r)
}

func (n *realNVML) Device(i int) (NVMLDevice, error) {
	d, r := n.lib.DeviceGetHandleByIndex(i)
	if err := n.nvmlErr(r); err != nil {
		return nil, err
	}
	return &realDevice{n: n, d: d}, nil
}

type realDevice struct {
	n *realNVML
	d nvml.Device
}

func (d *realDevice) Name() (string, error) {
	v, r := d.d.GetName()
	return v, d.n.nvmlErr(r)
}

func (d *realDevice) UUID() (string, error) {
	v, r := d.d.GetUUID()
	return v, d.n.nvmlErr(r)
}

func (d *realDevice) Minor() (int, error) {
	v, r := d.d.GetMinorNumber()
	return v, d.n.nvmlErr(r)
}

func (d *realDevice) MemoryTotal() (uint64, error) {
	m, r := d.d.GetMemoryInfo()
	return m.Total, d.n.nvmlErr(r)
}

func (d *realDevice) PCIBusID() (string, error) {
	p, r := d.d.GetPciInfo()
	if err := d.n.nvmlErr(r); err != nil {
		return "", err
	}
	b := make([]byte, 0, len(p.BusId))
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b), nil
}

func (d *realDevice) NUMANode() (int, error) {
	v, r := d.d.GetNumaNodeId()
	return v, d.n.nvmlErr(r)
}

func (d *realDevice) Temperature() (uint32, error) {
	v, r := d.d.GetTemperature(nvml.TEMPERATURE_GPU)
	return v, d.n.nvmlErr(r)
}

func (d *realDevice) SMClock() (uint32, error) {
	v, r := d.d.GetClockInfo(nvml.CLOCK_SM)
	return v, d.n.nvmlErr(r)
}

func (d *realDevice) MaxSMClock() (uint32, error) {
	v, r := d.d.GetMaxClockInfo(nvml.CLOCK_SM)
	return v, d.n.nvmlErr(r)
}

func (d *realDevice) Power() (uint32, error) {
	v, r := d.d.GetPowerUsage()
	return v, d.n.nvmlErr(r)
}

func (d *realDevice) ClockEventReasons() (uint64, error) {
	v, r := d.d.GetCurrentClocksEventReasons()
	return v, d.n.nvmlErr(r)
}

func (d *realDevice) MemoryUsed() (uint64, error) {
	m, r := d.d.GetMemoryInfo()
	return m.Used, d.n.nvmlErr(r)
}

func (d *realDevice) ComputeProcesses() ([]uint32, error) {
	ps, r := d.d.GetComputeRunningProcesses()
	if err := d.n.nvmlErr(r); err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Pid)
	}
	return out, nil
}

func (d *realDevice) SetLockedClocks(lo, hi uint32) error {
	return d.n.nvmlErr(d.d.SetGpuLockedClocks(lo, hi))
}

func (d *realDevice) ResetLockedClocks() error {
	return d.n.nvmlErr(d.d.ResetGpuLockedClocks())
}

func (d *realDevice) ECCUncorrected() (uint64, error) {
	v, r := d.d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	return v, d.n.nvmlErr(r)
}

func (d *realDevice) RemappedRows() (RemappedRows, error) {
	corr, unc, pending, failed, r := d.d.GetRemappedRows()
	return RemappedRows{Correctable: corr, Uncorrectable: unc, Pending: pending, Failed: failed}, d.n.nvmlErr(r)
}

func (n *realNVML) WatchXid() (XidEvents, error) {
	set, r := n.lib.EventSetCreate()
	if err := n.nvmlErr(r); err != nil {
		return nil, fmt.Errorf("create an NVML event set: %w", err)
	}
	c, r := n.lib.DeviceGetCount()
	if err := n.nvmlErr(r); err != nil {
		set.Free()
		return nil, err
	}
	x := &realXid{n: n, set: set}
	var errs []error
	for i := range c {
		d, r := n.lib.DeviceGetHandleByIndex(i)
		if err := n.nvmlErr(r); err != nil {
			errs = append(errs, err)
			continue
		}
		uuid, _ := d.GetUUID()
		// Not every GPU supports every event: register what it has.
		if err := n.nvmlErr(d.RegisterEvents(nvml.EventTypeXidCriticalError, set)); err != nil {
			errs = append(errs, fmt.Errorf("GPU %s: %w", uuid, err))
		}
	}
	if len(errs) == c && c > 0 {
		set.Free()
		return nil, fmt.Errorf("register for Xid events: %w", errors.Join(errs...))
	}
	return x, nil
}

type realXid struct {
	n   *realNVML
	set nvml.EventSet
}

func (x *realXid) Wait(timeout time.Duration) (string, uint64, error) {
	e, r := x.set.Wait(uint32(timeout.Milliseconds()))
	if r == nvml.ERROR_TIMEOUT {
		return "", 0, ErrNoEvent
	}
	if err := x.n.nvmlErr(r); err != nil {
		return "", 0, err
	}
	var uuid string
	if e.Device != nil {
		uuid, _ = e.Device.GetUUID()
	}
	return uuid, e.EventData, nil
}

func (x *realXid) Close() error { return x.n.nvmlErr(x.set.Free()) }

func (d *realDevice) Violations() (uint64, uint64, error) {
	th, r := d.d.GetViolationStatus(nvml.PERF_POLICY_THERMAL)
	if err := d.n.nvmlErr(r); err != nil {
		return 0, 0, err
	}
	pw, r := d.d.GetViolationStatus(nvml.PERF_POLICY_POWER)
	if err := d.n.nvmlErr(r); err != nil {
		return 0, 0, err
	}
	return th.ViolationTime, pw.ViolationTime, nil
}

func (d *realDevice) NVLinkPeers() ([]string, error) {
	var out []string
	for link := range nvml.NVLINK_MAX_LINKS {
		state, r := d.d.GetNvLinkState(link)
		if r == nvml.ERROR_NOT_SUPPORTED || r == nvml.ERROR_INVALID_ARGUMENT {
			break // no NVLink, or no more links
		}
		if r != nvml.SUCCESS || state != nvml.FEATURE_ENABLED {
			continue
		}
		if t, r := d.d.GetNvLinkRemoteDeviceType(link); r == nvml.SUCCESS && t != nvml.NVLINK_DEVICE_TYPE_GPU {
			continue // an NVSwitch, or a CPU
		}
		p, r := d.d.GetNvLinkRemotePciInfo(link)
		if r != nvml.SUCCESS {
			continue
		}
		b := make([]byte, 0, len(p.BusId))
		for _, c := range p.BusId {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		out = append(out, string(b))
	}
	return out, nil
}

func (d *realDevice) MIGDevices() ([]MIGDevice, error) {
	cur, _, r := d.d.GetMigMode()
	if err := d.n.nvmlErr(r); err != nil || cur != nvml.DEVICE_MIG_ENABLE {
		return nil, err
	}
	n, r := d.d.GetMaxMigDeviceCount()
	if err := d.n.nvmlErr(r); err != nil {
		return nil, err
	}
	var out []MIGDevice
	for i := range n {
		m, r := d.d.GetMigDeviceHandleByIndex(i)
		if r == nvml.ERROR_NOT_FOUND || r == nvml.ERROR_INVALID_ARGUMENT {
			continue // a slot with no instance in it
		}
		if err := d.n.nvmlErr(r); err != nil {
			return nil, err
		}
		var md MIGDevice
		var errs []error
		var e nvml.Return
		md.UUID, e = m.GetUUID()
		errs = append(errs, d.n.nvmlErr(e))
		md.Name, e = m.GetName()
		errs = append(errs, d.n.nvmlErr(e))
		mem, e := m.GetMemoryInfo()
		errs = append(errs, d.n.nvmlErr(e))
		md.Memory = mem.Total
		md.GI, e = m.GetGpuInstanceId()
		errs = append(errs, d.n.nvmlErr(e))
		md.CI, e = m.GetComputeInstanceId()
		errs = append(errs, d.n.nvmlErr(e))
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("MIG device %d: %w", i, err)
		}
		out = append(out, md)
	}
	return out, nil
}
