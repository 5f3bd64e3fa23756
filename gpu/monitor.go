package gpu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Clock-event ("throttle") reasons of NVML's bitmask that kernelbox acts on.
const (
	ReasonIdle         uint64 = 0x1
	ReasonSwPowerCap   uint64 = 0x4
	ReasonHwSlowdown   uint64 = 0x8
	ReasonSwThermal    uint64 = 0x20
	ReasonHwThermal    uint64 = 0x40
	ReasonHwPowerBrake uint64 = 0x80
)

// DefaultThrottleMask are the reasons that make a timing unfair: the
// environment slowed the GPU (heat, a hardware slowdown, the power brake).
// The software power cap is left out: a heavy kernel reaches it by itself,
// and with clocks locked below the maximum it rarely does.
const DefaultThrottleMask = ReasonHwSlowdown | ReasonSwThermal | ReasonHwThermal | ReasonHwPowerBrake

// ErrGate means a GPU did not become fit for a ranked run in time.
var ErrGate = errors.New("GPU not ready for a ranked run")

// Telemetry is one reading of a GPU.
type Telemetry struct {
	At         time.Time `json:"at"`
	TempC      uint32    `json:"temp_c"`
	SMClockMHz uint32    `json:"sm_clock_mhz"`
	PowerMW    uint32    `json:"power_mw"`
	Reasons    uint64    `json:"clock_event_reasons"`
	MemUsed    uint64    `json:"memory_used_bytes"`
	Processes  int       `json:"compute_processes"`
}

// Monitor keeps NVML open for the daemon's life: readings, the pre-flight
// gate, sampling across a run, and clock locks (undone at Close).
type Monitor struct {
	lib      NVML
	mu       sync.Mutex
	devs     map[string]NVMLDevice // by UUID
	baseline map[string]uint64     // memory used when idle, at open
	locked   map[string][2]uint32  // the SM clock range this monitor locked
	ecc      map[string]uint64     // uncorrectable ECC errors already reported
	xids     map[string][]uint64   // hardware Xids since the last Health, by UUID
	// XidErr says why Xid events are not watched, when they are not.
	XidErr error
	// Relocks counts the clock locks the gate had to restore.
	Relocks atomic.Int64
	stop    chan struct{}
	done    chan struct{}
}

// OpenMonitor initialises NVML and keeps it until Close.
func OpenMonitor(lib NVML) (*Monitor, error) {
	if err := lib.Init(); err != nil {
		return nil, fmt.Errorf("open GPU monitor: %w", err)
	}
	m := &Monitor{lib: lib, devs: map[string]NVMLDevice{}, baseline: map[string]uint64{}, locked: map[string][2]uint32{},
		ecc: map[string]uint64{}, xids: map[string][]uint64{}}
	n, err := lib.DeviceCount()
	if err != nil {
		lib.Shutdown()
		return nil, fmt.Errorf("open GPU monitor: %w", err)
	}
	for i := range n {
		d, err := lib.Device(i)
		if err != nil {
			lib.Shutdown()
			return nil, fmt.Errorf("open GPU monitor: GPU %d: %w", i, err)
		}
		uuid, err := d.UUID()
		if err != nil {
			lib.Shutdown()
			return nil, fmt.Errorf("open GPU monitor: GPU %d: %w", i, err)
		}
		m.devs[uuid] = d
		m.baseline[uuid], _ = d.MemoryUsed()
		m.ecc[uuid], _ = d.ECCUncorrected()
	}
	if ev, err := lib.WatchXid(); err != nil {
		m.XidErr = err
	} else {
		m.stop, m.done = make(chan struct{}), make(chan struct{})
		go m.watchXid(ev)
	}
	return m, nil
}

// hardwareXids are the Xid errors that say the GPU itself is unwell
// (memory, bus, firmware). A program's fault is an Xid too (13, 31, 43 for
// an illegal address), and must not take a GPU out of service: anyone
// could drain the box with one bad kernel.
var hardwareXids = map[uint64]string{
	48: "double-bit ECC error", 61: "micro-controller breakpoint", 62: "micro-controller halt",
	63: "row remapping or page retirement", 64: "row remapping or page retirement failed", 74: "NVLink error",
	79: "GPU has fallen off the bus", 92: "high single-bit ECC error rate", 94: "contained ECC error",
	95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error", 140: "unrecovered ECC error",
}

// watchXid records hardware Xids until Close; it is the monitor's one
// goroutine.
func (m *Monitor) watchXid(ev XidEvents) {
	defer close(m.done)
	defer ev.Close()
	for {
		select {
		case <-m.stop:
			return
		default:
		}
		uuid, xid, err := ev.Wait(500 * time.Millisecond)
		if err != nil {
			if !errors.Is(err, ErrNoEvent) {
				// A broken event set would spin: wait as a timeout would.
				select {
				case <-m.stop:
					return
				case <-time.After(500 * time.Millisecond):
				}
			}
			continue
		}
		if _, bad := hardwareXids[xid]; bad {
			m.mu.Lock()
			m.xids[uuid] = append(m.xids[uuid], xid)
			m.mu.Unlock()
		}
	}
}

// Health lists what is wrong with a GPU's hardware since the last call:
// hardware Xid errors, new uncorrectable ECC errors, and row remappings
// pending (they need a GPU reset) or failed (the GPU needs service). A
// GPU without ECC or row remapping reports only what it has.
func (m *Monitor) Health(uuid string) ([]string, error) {
	d, err := m.dev(uuid)
	if err != nil {
		return nil, err
	}
	var out []string
	m.mu.Lock()
	xids := m.xids[uuid]
	delete(m.xids, uuid)
	m.mu.Unlock()
	for _, x := range xids {
		out = append(out, fmt.Sprintf("Xid %d (%s)", x, hardwareXids[x]))
	}
	if n, err := d.ECCUncorrected(); err == nil {
		m.mu.Lock()
		if n > m.ecc[uuid] {
			out = append(out, fmt.Sprintf("%d new uncorrectable ECC errors", n-m.ecc[uuid]))
			m.ecc[uuid] = n
		}
		m.mu.Unlock()
	}
	if rr, err := d.RemappedRows(); err == nil {
		if rr.Failed {
			out = append(out, "a memory row remapping failed: the GPU needs service")
		} else if rr.Pending {
			out = append(out, "a memory row remapping is pending: reset the GPU (nvidia-smi -r)")
		}
	}
	return out, nil
}

// Close resets the clocks this monitor locked and closes NVML.
func (m *Monitor) Close() error {
	if m.stop != nil {
		close(m.stop)
		<-m.done
		m.stop = nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for uuid := range m.locked {
		if err := m.devs[uuid].ResetLockedClocks(); err != nil {
			errs = append(errs, fmt.Errorf("reset clocks of %s: %w", uuid, err))
		}
	}
	m.locked = map[string][2]uint32{}
	errs = append(errs, m.lib.Shutdown())
	return errors.Join(errs...)
}

func (m *Monitor) dev(uuid string) (NVMLDevice, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.devs[uuid]
	if !ok {
		return nil, fmt.Errorf("no GPU %s", uuid)
	}
	return d, nil
}

// Read takes one reading. Values a GPU does not support stay zero.
func (m *Monitor) Read(uuid string) (Telemetry, error) {
	t, err := m.readClocks(uuid)
	if err != nil {
		return t, err
	}
	d, err := m.dev(uuid)
	if err != nil {
		return t, err
	}
	var e1, e2 error
	t.MemUsed, e1 = d.MemoryUsed()
	procs, e2 := d.ComputeProcesses()
	t.Processes = len(procs)
	return t, readErr(uuid, e1, e2)
}

// readClocks is the cheap part of Read, which a running run's sampling
// takes: listing the GPU's processes takes the driver longer.
func (m *Monitor) readClocks(uuid string) (Telemetry, error) {
	d, err := m.dev(uuid)
	if err != nil {
		return Telemetry{}, err
	}
	t := Telemetry{At: time.Now().UTC()}
	var e [4]error
	t.TempC, e[0] = d.Temperature()
	t.SMClockMHz, e[1] = d.SMClock()
	t.PowerMW, e[2] = d.Power()
	t.Reasons, e[3] = d.ClockEventReasons()
	return t, readErr(uuid, e[:]...)
}

// readErr joins a reading's errors, leaving out what the GPU does not
// support.
func readErr(uuid string, errs ...error) error {
	var keep []error
	for _, e := range errs {
		if e != nil && !errors.Is(e, ErrNotSupported) {
			keep = append(keep, e)
		}
	}
	if len(keep) > 0 {
		return fmt.Errorf("read GPU %s: %w", uuid, errors.Join(keep...))
	}
	return nil
}

// GateConfig says when a GPU is fit for a ranked run.
type GateConfig struct {
	MaxTempC uint32        // hotter than this: wait for it to cool (0: no limit)
	Wait     time.Duration // how long to wait for the GPU to become fit
	Poll     time.Duration // how often to look while waiting
	// MemorySlack is how far above its idle baseline used memory may be
	// (something left on the GPU).
	MemorySlack  uint64
	ThrottleMask uint64
}

// Gate waits until the GPU is fit for a ranked run: no compute process on
// it, memory back at its baseline, no throttle reason of the mask, and
// cool enough. It returns the reading that passed, or ErrGate with what
// was still wrong when the wait ran out.
func (m *Monitor) Gate(ctx context.Context, uuid string, cfg GateConfig) (Telemetry, error) {
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	deadline := time.Now().Add(cfg.Wait)
	relocked := false
	for {
		t, err := m.Read(uuid)
		if err != nil {
			return t, err
		}
		if !relocked {
			again, err := m.relock(uuid, t)
			if err != nil {
				return t, err
			}
			if again {
				relocked = true // once: a GPU that reads off its lock at idle must not loop here
				m.Relocks.Add(1)
				continue // read again under the restored lock
			}
		}
		why := m.unfit(uuid, t, cfg)
		if len(why) == 0 {
			return t, nil
		}
		if !time.Now().Before(deadline) {
			return t, fmt.Errorf("%w: %s after %v", ErrGate, strings.Join(why, ", "), cfg.Wait)
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(cfg.Poll):
		}
	}
}

func (m *Monitor) unfit(uuid string, t Telemetry, cfg GateConfig) []string {
	var why []string
	if t.Processes > 0 {
		why = append(why, fmt.Sprintf("%d compute processes on it", t.Processes))
	}
	m.mu.Lock()
	base := m.baseline[uuid]
	m.mu.Unlock()
	if t.MemUsed > base+cfg.MemorySlack {
		why = append(why, fmt.Sprintf("%d MiB used against %d MiB idle", t.MemUsed>>20, base>>20))
	}
	if r := t.Reasons & cfg.ThrottleMask; r != 0 {
		why = append(why, fmt.Sprintf("throttled (reasons %#x)", r))
	}
	if cfg.MaxTempC > 0 && t.TempC > cfg.MaxTempC {
		why = append(why, fmt.Sprintf("%d °C, above %d °C", t.TempC, cfg.MaxTempC))
	}
	return why
}

// RunTelemetry is what a run's sampling found: the readings before and
// after, the range of the SM clock, the peaks, and every clock-event
// reason seen.
type RunTelemetry struct {
	GPU         string    `json:"gpu"`
	Before      Telemetry `json:"before"`
	After       Telemetry `json:"after"`
	Samples     int       `json:"samples"`
	SMClockMin  uint32    `json:"sm_clock_min_mhz"`
	SMClockMax  uint32    `json:"sm_clock_max_mhz"`
	SMClockMean float64   `json:"sm_clock_mean_mhz"`
	TempMaxC    uint32    `json:"temp_max_c"`
	PowerMaxMW  uint32    `json:"power_max_mw"`
	Reasons     uint64    `json:"clock_event_reasons"`
	// ThermalNs and PowerNs are how long the driver's cumulative
	// violation counters say the GPU was held back by heat or by its power
	// limit during the run: they see throttling between two samples.
	ThermalNs uint64 `json:"thermal_violation_ns"`
	PowerNs   uint64 `json:"power_violation_ns"`
	// Throttled is set when a reason of the mask was seen, or the thermal
	// counter moved: the run's timings are not comparable and it must not
	// be scored.
	Throttled bool `json:"throttled"`
	// Series is the SM clock and temperature over the run, thinned to at
	// most MaxSeries points (every reading of a short run, every 2nd, 4th
	// ... of a long one), for a plot beside the run's results.
	Series []SeriesPoint `json:"series,omitempty"`
}

// SeriesPoint is one reading of a run's series, at Ms milliseconds from
// the first.
type SeriesPoint struct {
	Ms         int64  `json:"ms"`
	SMClockMHz uint32 `json:"sm_mhz"`
	TempC      uint32 `json:"temp_c"`
}

// MaxSeries bounds a run's series: a 10-minute run sampled every 100 ms
// keeps one reading in 32.
const MaxSeries = 256

// Sampler reads a GPU every interval until Stop.
type Sampler struct {
	m     *Monitor
	uuid  string
	mask  uint64
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	out   RunTelemetry
	sumMH float64
	viol  [2]uint64 // thermal, power at the start
	hasV  bool
	// start is the first reading's time; stride keeps every stride-th
	// reading in the series once it has filled (doubling each time).
	start  time.Time
	stride int
}

// Sample starts reading the GPU every interval; Stop ends it and returns
// the summary. The goroutine belongs to the Sampler.
func (m *Monitor) Sample(uuid string, every time.Duration, mask uint64) *Sampler {
	s := &Sampler{m: m, uuid: uuid, mask: mask, stop: make(chan struct{}), done: make(chan struct{})}
	s.out.GPU = uuid
	if d, err := m.dev(uuid); err == nil {
		if th, pw, err := d.Violations(); err == nil {
			s.viol, s.hasV = [2]uint64{th, pw}, true
		}
	}
	if t, err := m.Read(uuid); err == nil {
		s.out.Before = t
		s.add(t)
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				if t, err := m.readClocks(uuid); err == nil {
					s.add(t)
				}
			}
		}
	}()
	return s
}

func (s *Sampler) add(t Telemetry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := &s.out
	if o.Samples == 0 || t.SMClockMHz < o.SMClockMin {
		o.SMClockMin = t.SMClockMHz
	}
	o.SMClockMax = max(o.SMClockMax, t.SMClockMHz)
	o.TempMaxC = max(o.TempMaxC, t.TempC)
	o.PowerMaxMW = max(o.PowerMaxMW, t.PowerMW)
	o.Reasons |= t.Reasons
	o.Samples++
	s.sumMH += float64(t.SMClockMHz)
	s.addPoint(t)
}

// addPoint keeps a reading in the series: all of them until MaxSeries,
// then every other one kept so far and every stride-th from then on, so
// a run of any length keeps an even spread.
func (s *Sampler) addPoint(t Telemetry) {
	if s.stride == 0 {
		s.start, s.stride = t.At, 1
	}
	if (s.out.Samples-1)%s.stride != 0 {
		return
	}
	o := &s.out
	o.Series = append(o.Series, SeriesPoint{Ms: t.At.Sub(s.start).Milliseconds(), SMClockMHz: t.SMClockMHz, TempC: t.TempC})
	if len(o.Series) >= MaxSeries {
		kept := o.Series[:0]
		for i := 0; i < len(o.Series); i += 2 {
			kept = append(kept, o.Series[i])
		}
		o.Series, s.stride = kept, s.stride*2
	}
}

// Stop ends the sampling with a last reading and returns the summary.
func (s *Sampler) Stop() RunTelemetry {
	close(s.stop)
	<-s.done
	if t, err := s.m.Read(s.uuid); err == nil {
		s.out.After = t
		s.add(t)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out.Samples > 0 {
		s.out.SMClockMean = s.sumMH / float64(s.out.Samples)
	}
	if d, err := s.m.dev(s.uuid); err == nil && s.hasV {
		if th, pw, err := d.Violations(); err == nil && th >= s.viol[0] && pw >= s.viol[1] {
			s.out.ThermalNs, s.out.PowerNs = th-s.viol[0], pw-s.viol[1]
		}
	}
	s.out.Throttled = s.out.Reasons&s.mask != 0 || s.out.ThermalNs > 0
	return s.out
}

// LockClocks locks the GPU's SM clock to [lo, hi] MHz; Close undoes it.
func (m *Monitor) LockClocks(uuid string, lo, hi uint32) error {
	d, err := m.dev(uuid)
	if err != nil {
		return err
	}
	if err := d.SetLockedClocks(lo, hi); err != nil {
		return fmt.Errorf("lock clocks of %s to %d-%d MHz: %w", uuid, lo, hi, err)
	}
	m.mu.Lock()
	m.locked[uuid] = [2]uint32{lo, hi}
	m.mu.Unlock()
	return nil
}

// relock locks the clocks again where a driver reset (or another tool)
// dropped the lock: an idle GPU under a lock stays at its clock, so a
// reading outside the range means the lock is gone.
func (m *Monitor) relock(uuid string, t Telemetry) (bool, error) {
	m.mu.Lock()
	r, ok := m.locked[uuid]
	d := m.devs[uuid]
	m.mu.Unlock()
	if !ok {
		return false, nil
	}
	// A backend whose driver picks the locked clock (AMD's
	// profile_standard) says itself whether the lock holds.
	if h, ok := d.(interface{ LockHolds() (bool, error) }); ok {
		if holds, err := h.LockHolds(); err != nil || holds {
			return false, err
		}
	} else if t.SMClockMHz == 0 || (t.SMClockMHz >= r[0] && t.SMClockMHz <= r[1]) {
		return false, nil
	}
	return true, m.LockClocks(uuid, r[0], r[1])
}

// MaxSMClock is the GPU's highest SM clock.
func (m *Monitor) MaxSMClock(uuid string) (uint32, error) {
	d, err := m.dev(uuid)
	if err != nil {
		return 0, err
	}
	return d.MaxSMClock()
}
