// Package gputest holds a fake NVIDIA management library for the tests of
// gpu and of the packages above it; it is imported only from tests.
package gputest

import (
	"fmt"

	"kernelbox/gpu"
)

// NVML is a fake gpu.NVML with scripted GPUs. Every method answers: a
// field left zero gives a zero value, never a panic.
type NVML struct {
	InitErr error // returned by Init (a host without the driver)
	Driver  string
	GPUs    []GPU
	Inits   int // Init calls, to check that every Init has its Shutdown
	Downs   int
}

// GPU is one fake GPU's answers.
type GPU struct {
	Name, UUID string
	Minor      int
	Memory     uint64
	PCI        string // as NVML writes it: 00000000:00:06.0
	NUMA       int    // -1: not supported

	// Telemetry. The Func fields, when set, answer instead of the values
	// (a GPU cooling down, a throttle that comes and goes).
	Temp        uint32
	TempFunc    func() uint32
	SMClockMHz  uint32
	MaxSMMHz    uint32
	PowerMW     uint32
	Reasons     uint64
	ReasonsFunc func() uint64
	MemUsed     uint64
	Procs       []uint32
	// Locked records SetLockedClocks ([0, 0] after a reset); LockErr fails it.
	Locked  [2]uint32
	LockErr error
}

var _ gpu.NVML = (*NVML)(nil)

// Init implements gpu.NVML.
func (f *NVML) Init() error {
	f.Inits++
	return f.InitErr
}

// Shutdown implements gpu.NVML.
func (f *NVML) Shutdown() error {
	f.Downs++
	return nil
}

// DriverVersion implements gpu.NVML.
func (f *NVML) DriverVersion() (string, error) { return f.Driver, nil }

// DeviceCount implements gpu.NVML.
func (f *NVML) DeviceCount() (int, error) { return len(f.GPUs), nil }

// Device implements gpu.NVML.
func (f *NVML) Device(i int) (gpu.NVMLDevice, error) {
	if i < 0 || i >= len(f.GPUs) {
		return nil, fmt.Errorf("fake nvml: no GPU %d", i)
	}
	return device{&f.GPUs[i]}, nil
}

type device struct{ g *GPU }

func (d device) Name() (string, error)        { return d.g.Name, nil }
func (d device) UUID() (string, error)        { return d.g.UUID, nil }
func (d device) Minor() (int, error)          { return d.g.Minor, nil }
func (d device) MemoryTotal() (uint64, error) { return d.g.Memory, nil }
func (d device) PCIBusID() (string, error)    { return d.g.PCI, nil }

func (d device) NUMANode() (int, error) {
	if d.g.NUMA < 0 {
		return 0, gpu.ErrNotSupported
	}
	return d.g.NUMA, nil
}

func (d device) Temperature() (uint32, error) {
	if d.g.TempFunc != nil {
		return d.g.TempFunc(), nil
	}
	return d.g.Temp, nil
}

func (d device) SMClock() (uint32, error)    { return d.g.SMClockMHz, nil }
func (d device) MaxSMClock() (uint32, error) { return d.g.MaxSMMHz, nil }
func (d device) Power() (uint32, error)      { return d.g.PowerMW, nil }

func (d device) ClockEventReasons() (uint64, error) {
	if d.g.ReasonsFunc != nil {
		return d.g.ReasonsFunc(), nil
	}
	return d.g.Reasons, nil
}

func (d device) MemoryUsed() (uint64, error)         { return d.g.MemUsed, nil }
func (d device) ComputeProcesses() ([]uint32, error) { return d.g.Procs, nil }

func (d device) SetLockedClocks(lo, hi uint32) error {
	if d.g.LockErr != nil {
		return d.g.LockErr
	}
	d.g.Locked = [2]uint32{lo, hi}
	return nil
}

func (d device) ResetLockedClocks() error {
	d.g.Locked = [2]uint32{}
	return nil
}
