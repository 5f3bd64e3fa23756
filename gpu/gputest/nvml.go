// Package gputest holds a fake NVIDIA management library for the tests of
// gpu and of the packages above it; it is imported only from tests.
package gputest

import (
	"fmt"
	"sync"
	"time"

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
	// XidErr fails WatchXid (a GPU without events).
	XidErr error

	mu   sync.Mutex // guards GPUs once a daemon reads them from its goroutines
	xids chan xidEvent
}

type xidEvent struct {
	uuid string
	xid  uint64
}

// Xid delivers an Xid event, as the driver would, to the watcher.
func (f *NVML) Xid(uuid string, xid uint64) {
	f.events() <- xidEvent{uuid, xid}
}

func (f *NVML) events() chan xidEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.xids == nil {
		f.xids = make(chan xidEvent, 16)
	}
	return f.xids
}

// WatchXid implements gpu.NVML.
func (f *NVML) WatchXid() (gpu.XidEvents, error) {
	if f.XidErr != nil {
		return nil, f.XidErr
	}
	return xidWatch{f.events()}, nil
}

type xidWatch struct{ c chan xidEvent }

func (w xidWatch) Wait(timeout time.Duration) (string, uint64, error) {
	select {
	case e := <-w.c:
		return e.uuid, e.xid, nil
	case <-time.After(timeout):
		return "", 0, gpu.ErrNoEvent
	}
}

func (w xidWatch) Close() error { return nil }

// Set changes the GPUs' answers while something else reads them.
func (f *NVML) Set(fn func(gpus []GPU)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.GPUs)
}

// Get reads the GPUs' state (the locked clocks) safely.
func (f *NVML) Get(fn func(gpus []GPU)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.GPUs)
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
	// Health: ECC is the uncorrectable count; NoECC makes both health
	// calls unsupported, as on a board without ECC.
	ECC   uint64
	Remap gpu.RemappedRows
	NoECC bool
	// ThermalNs and PowerNs are the violation counters.
	ThermalNs, PowerNs uint64
	// MIG are the GPU's MIG instances (MIG on when any).
	MIG []gpu.MIGDevice
	// NVLink are the PCI ids at the far end of its NVLinks, a link each.
	NVLink []string
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
	return device{&f.GPUs[i], &f.mu}, nil
}

type device struct {
	g  *GPU
	mu *sync.Mutex
}

// get reads one answer under the fake's lock.
func get[T any](d device, v func(*GPU) T) T {
	d.mu.Lock()
	defer d.mu.Unlock()
	return v(d.g)
}

func (d device) Name() (string, error) { return get(d, func(g *GPU) string { return g.Name }), nil }
func (d device) UUID() (string, error) { return get(d, func(g *GPU) string { return g.UUID }), nil }
func (d device) Minor() (int, error)   { return get(d, func(g *GPU) int { return g.Minor }), nil }
func (d device) MemoryTotal() (uint64, error) {
	return get(d, func(g *GPU) uint64 { return g.Memory }), nil
}
func (d device) PCIBusID() (string, error) { return get(d, func(g *GPU) string { return g.PCI }), nil }

func (d device) NUMANode() (int, error) {
	n := get(d, func(g *GPU) int { return g.NUMA })
	if n < 0 {
		return 0, gpu.ErrNotSupported
	}
	return n, nil
}

func (d device) Temperature() (uint32, error) {
	if fn := get(d, func(g *GPU) func() uint32 { return g.TempFunc }); fn != nil {
		return fn(), nil
	}
	return get(d, func(g *GPU) uint32 { return g.Temp }), nil
}

func (d device) SMClock() (uint32, error) {
	return get(d, func(g *GPU) uint32 { return g.SMClockMHz }), nil
}
func (d device) MaxSMClock() (uint32, error) {
	return get(d, func(g *GPU) uint32 { return g.MaxSMMHz }), nil
}
func (d device) Power() (uint32, error) { return get(d, func(g *GPU) uint32 { return g.PowerMW }), nil }

func (d device) ClockEventReasons() (uint64, error) {
	if fn := get(d, func(g *GPU) func() uint64 { return g.ReasonsFunc }); fn != nil {
		return fn(), nil
	}
	return get(d, func(g *GPU) uint64 { return g.Reasons }), nil
}

func (d device) MemoryUsed() (uint64, error) {
	return get(d, func(g *GPU) uint64 { return g.MemUsed }), nil
}

func (d device) ComputeProcesses() ([]uint32, error) {
	return get(d, func(g *GPU) []uint32 { return append([]uint32(nil), g.Procs...) }), nil
}

func (d device) SetLockedClocks(lo, hi uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.g.LockErr != nil {
		return d.g.LockErr
	}
	d.g.Locked = [2]uint32{lo, hi}
	return nil
}

func (d device) ResetLockedClocks() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.g.Locked = [2]uint32{}
	return nil
}

func (d device) ECCUncorrected() (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.g.NoECC {
		return 0, gpu.ErrNotSupported
	}
	return d.g.ECC, nil
}

func (d device) RemappedRows() (gpu.RemappedRows, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.g.NoECC {
		return gpu.RemappedRows{}, gpu.ErrNotSupported
	}
	return d.g.Remap, nil
}

func (d device) Violations() (uint64, uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.g.ThermalNs, d.g.PowerNs, nil
}

func (d device) NVLinkPeers() ([]string, error) {
	return get(d, func(g *GPU) []string { return append([]string(nil), g.NVLink...) }), nil
}

func (d device) MIGDevices() ([]gpu.MIGDevice, error) {
	return get(d, func(g *GPU) []gpu.MIGDevice { return append([]gpu.MIGDevice(nil), g.MIG...) }), nil
}
