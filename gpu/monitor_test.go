package gpu_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kernelbox/gpu"
	"kernelbox/gpu/gputest"
)

func fakeH200() *gputest.NVML {
	return &gputest.NVML{GPUs: []gputest.GPU{{Name: "NVIDIA H200", UUID: "GPU-aaaa", PCI: "00000000:00:06.0", NUMA: -1,
		Temp: 40, SMClockMHz: 1980, MaxSMMHz: 1980, PowerMW: 90000, MemUsed: 600 << 20, Reasons: gpu.ReasonIdle}}}
}

func TestMonitor_GateWaitsForCoolDown(t *testing.T) {
	t.Parallel()
	fake := fakeH200()
	var reads atomic.Int32
	fake.GPUs[0].TempFunc = func() uint32 { return 90 - 10*uint32(min(reads.Add(1), 4)) } // 80, 70, 60, 50, 50...
	m, err := gpu.OpenMonitor(fake)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tel, err := m.Gate(t.Context(), "GPU-aaaa", gpu.GateConfig{MaxTempC: 65, Wait: 5 * time.Second, Poll: time.Millisecond, ThrottleMask: gpu.DefaultThrottleMask})
	if err != nil || tel.TempC > 65 {
		t.Fatalf("Gate = %+v, %v; want to pass once at or below 65 °C", tel, err)
	}
	if n := reads.Load(); n < 3 {
		t.Errorf("Gate passed after %d readings, want it to have waited for the cool-down", n)
	}
}

func TestMonitor_GateRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		set  func(*gputest.GPU)
		want string
	}{
		"foreign process": {func(g *gputest.GPU) { g.Procs = []uint32{4242} }, "1 compute processes"},
		"memory left":     {func(g *gputest.GPU) { g.MemUsed = 8 << 30 }, "MiB used"},
		"throttled":       {func(g *gputest.GPU) { g.Reasons = gpu.ReasonHwThermal }, "throttled (reasons 0x40)"},
		"hot":             {func(g *gputest.GPU) { g.Temp = 88 }, "88 °C"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fake := fakeH200()
			m, err := gpu.OpenMonitor(fake) // the baseline: 600 MiB used
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			tc.set(&fake.GPUs[0])
			_, err = m.Gate(t.Context(), "GPU-aaaa", gpu.GateConfig{MaxTempC: 80, Wait: 20 * time.Millisecond, Poll: time.Millisecond,
				MemorySlack: 512 << 20, ThrottleMask: gpu.DefaultThrottleMask})
			if !errors.Is(err, gpu.ErrGate) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Gate = %v, want ErrGate saying %q", err, tc.want)
			}
		})
	}
}

func TestMonitor_SampleSeesThrottle(t *testing.T) {
	t.Parallel()
	fake := fakeH200()
	var n atomic.Int32
	// The third reading is throttled by heat, briefly.
	fake.GPUs[0].ReasonsFunc = func() uint64 {
		if n.Add(1) == 3 {
			return gpu.ReasonSwThermal
		}
		return 0
	}
	m, err := gpu.OpenMonitor(fake)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := m.Sample("GPU-aaaa", time.Millisecond, gpu.DefaultThrottleMask)
	for deadline := time.Now().Add(5 * time.Second); n.Load() < 5; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // the sampler's own pace, bounded
			t.Fatal("the sampler took fewer than 5 readings in 5 s")
		}
	}
	rt := s.Stop()
	if !rt.Throttled || rt.Reasons&gpu.ReasonSwThermal == 0 || rt.Samples < 5 || rt.SMClockMin != 1980 || rt.TempMaxC != 40 {
		t.Errorf("Stop() = %+v; want a throttled run with its readings", rt)
	}
	// A power cap alone does not void a run.
	fake.GPUs[0].ReasonsFunc = func() uint64 { return gpu.ReasonSwPowerCap }
	if rt := m.Sample("GPU-aaaa", time.Millisecond, gpu.DefaultThrottleMask).Stop(); rt.Throttled {
		t.Errorf("a software power cap marked the run throttled: %+v", rt)
	}
}

func TestMonitor_LockClocks(t *testing.T) {
	t.Parallel()
	fake := fakeH200()
	m, err := gpu.OpenMonitor(fake)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LockClocks("GPU-aaaa", 1500, 1500); err != nil {
		t.Fatal(err)
	}
	if fake.GPUs[0].Locked != [2]uint32{1500, 1500} {
		t.Errorf("locked = %v, want 1500-1500", fake.GPUs[0].Locked)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if fake.GPUs[0].Locked != [2]uint32{} || fake.Inits != fake.Downs {
		t.Errorf("after Close: locked %v, Init %d Shutdown %d; want clocks reset and NVML closed", fake.GPUs[0].Locked, fake.Inits, fake.Downs)
	}
	fake.GPUs[0].LockErr = errors.New("nvml: insufficient permissions")
	m2, _ := gpu.OpenMonitor(fake)
	defer m2.Close()
	if err := m2.LockClocks("GPU-aaaa", 1500, 1500); err == nil || !strings.Contains(err.Error(), "insufficient permissions") {
		t.Errorf("LockClocks without permission = %v", err)
	}
}

// TestMonitor_Health: hardware Xids, new uncorrectable ECC errors and row
// remappings are reported once each; a program's own fault (Xid 13, 43)
// is not a GPU problem; a board without ECC reports only what it has.
func TestMonitor_Health(t *testing.T) {
	t.Parallel()
	fake := fakeH200()
	fake.GPUs[0].ECC = 3 // before the daemon started: not this box's news
	m, err := gpu.OpenMonitor(fake)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if p, err := m.Health("GPU-aaaa"); err != nil || len(p) != 0 {
		t.Fatalf("a healthy GPU = %q, %v", p, err)
	}
	fake.Xid("GPU-aaaa", 43) // a kernel's illegal address
	fake.Xid("GPU-aaaa", 79)
	fake.Xid("GPU-aaaa", 13)
	fake.Set(func(g []gputest.GPU) { g[0].ECC = 5; g[0].Remap.Pending = true })
	var p []string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(strings.Join(p, ";"), "Xid 79") {
		time.Sleep(10 * time.Millisecond)
		p, _ = m.Health("GPU-aaaa")
	}
	got := strings.Join(p, "; ")
	for _, want := range []string{"Xid 79 (GPU has fallen off the bus)", "2 new uncorrectable ECC errors", "row remapping is pending"} {
		if !strings.Contains(got, want) {
			t.Errorf("Health = %q, want %q", got, want)
		}
	}
	if strings.Contains(got, "Xid 43") || strings.Contains(got, "Xid 13") {
		t.Errorf("Health = %q: a program's fault drained the GPU", got)
	}
	fake.Set(func(g []gputest.GPU) { g[0].Remap.Pending = false })
	if p, _ := m.Health("GPU-aaaa"); len(p) != 0 {
		t.Errorf("Health after the report = %q, want nothing new", p)
	}
	fake.Set(func(g []gputest.GPU) { g[0].NoECC = true })
	if p, err := m.Health("GPU-aaaa"); err != nil || len(p) != 0 {
		t.Errorf("a board without ECC = %q, %v", p, err)
	}
}

func TestMonitor_NoXidEvents(t *testing.T) {
	t.Parallel()
	fake := fakeH200()
	fake.XidErr = gpu.ErrNotSupported
	m, err := gpu.OpenMonitor(fake)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(m.XidErr, gpu.ErrNotSupported) {
		t.Errorf("XidErr = %v, want the reason events are not watched", m.XidErr)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}

// TestMonitor_RealHost opens the real NVML where there is one (the GPU
// machine) and reads every GPU's telemetry and health through it.
func TestMonitor_RealHost(t *testing.T) {
	t.Parallel()
	m, err := gpu.OpenMonitor(gpu.NewNVML())
	if err != nil {
		t.Skipf("no NVIDIA driver here: %v", err)
	}
	defer m.Close()
	inv := gpu.Discover(t.Context(), gpu.Options{})
	t.Logf("Xid events: %v (nil: watched)", m.XidErr)
	for _, g := range inv.GPUs {
		tel, err := m.Read(g.UUID)
		if err != nil {
			t.Errorf("Read(%s) = %v", g.UUID, err)
		}
		p, err := m.Health(g.UUID)
		t.Logf("GPU %s: %+v; health problems %q, err %v", g.UUID, tel, p, err)
		if err != nil {
			t.Errorf("Health(%s) = %v", g.UUID, err)
		}
	}
}

// TestMonitor_RelockAfterReset: a driver reset drops the clock lock; the
// next gate sees the GPU idle off its locked clock and locks it again,
// once, even if the reading stays off.
func TestMonitor_RelockAfterReset(t *testing.T) {
	t.Parallel()
	fake := fakeH200()
	fake.GPUs[0].SMClockMHz, fake.GPUs[0].Reasons = 1500, 0
	m, err := gpu.OpenMonitor(fake)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.LockClocks("GPU-aaaa", 1500, 1500); err != nil {
		t.Fatal(err)
	}
	cfg := gpu.GateConfig{Wait: time.Second, Poll: time.Millisecond, MemorySlack: 1 << 30}
	if _, err := m.Gate(t.Context(), "GPU-aaaa", cfg); err != nil || m.Relocks.Load() != 0 {
		t.Fatalf("gate under the lock = %v, %d relocks; want a pass and none", err, m.Relocks.Load())
	}
	fake.Set(func(g []gputest.GPU) { g[0].Locked, g[0].SMClockMHz = [2]uint32{}, 345 }) // the reset
	if _, err := m.Gate(t.Context(), "GPU-aaaa", cfg); err != nil {
		t.Fatal(err)
	}
	var locked [2]uint32
	fake.Get(func(g []gputest.GPU) { locked = g[0].Locked })
	if locked != [2]uint32{1500, 1500} || m.Relocks.Load() != 1 {
		t.Errorf("after the reset: locked %v, %d relocks; want 1500-1500 again, once", locked, m.Relocks.Load())
	}
}

// TestMonitor_SampleViolationCounters: the driver's thermal counter moving
// during a run voids it even when no sample caught a throttle reason; the
// power counter is recorded.
func TestMonitor_SampleViolationCounters(t *testing.T) {
	t.Parallel()
	fake := fakeH200()
	fake.GPUs[0].ThermalNs, fake.GPUs[0].PowerNs = 1000, 5000
	m, err := gpu.OpenMonitor(fake)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := m.Sample("GPU-aaaa", time.Hour, gpu.DefaultThrottleMask)
	fake.Set(func(g []gputest.GPU) { g[0].PowerNs += 700 })
	if rt := s.Stop(); rt.Throttled || rt.PowerNs != 700 || rt.ThermalNs != 0 {
		t.Errorf("a run under the power limit only = %+v; want power 700 ns recorded, not throttled", rt)
	}
	s = m.Sample("GPU-aaaa", time.Hour, gpu.DefaultThrottleMask)
	fake.Set(func(g []gputest.GPU) { g[0].ThermalNs += 2_000_000 })
	if rt := s.Stop(); !rt.Throttled || rt.ThermalNs != 2_000_000 {
		t.Errorf("a run the thermal counter saw = %+v; want throttled, 2 ms", rt)
	}
}

// TestMonitor_SampleSeries: a run's series keeps every reading until it
// holds MaxSeries, then thins evenly: a long run's series stays bounded,
// spans the whole run, in order.
func TestMonitor_SampleSeries(t *testing.T) {
	t.Parallel()
	fake := fakeH200()
	var n atomic.Int32
	fake.GPUs[0].ReasonsFunc = func() uint64 { n.Add(1); return 0 }
	m, err := gpu.OpenMonitor(fake)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := m.Sample("GPU-aaaa", 100*time.Microsecond, gpu.DefaultThrottleMask)
	for deadline := time.Now().Add(20 * time.Second); n.Load() < 3*gpu.MaxSeries; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sampler took %d readings in 20 s", n.Load())
		}
	}
	rt := s.Stop()
	if len(rt.Series) < gpu.MaxSeries/2 || len(rt.Series) >= gpu.MaxSeries {
		t.Fatalf("%d readings kept %d points; want between %d and %d", rt.Samples, len(rt.Series), gpu.MaxSeries/2, gpu.MaxSeries)
	}
	if rt.Series[0].Ms != 0 || rt.Series[0].SMClockMHz != 1980 {
		t.Errorf("first point = %+v, want the first reading at 0 ms", rt.Series[0])
	}
	for i := 1; i < len(rt.Series); i++ {
		if rt.Series[i].Ms < rt.Series[i-1].Ms {
			t.Fatalf("series out of order at %d: %+v", i, rt.Series[i-1:i+1])
		}
	}
	short := m.Sample("GPU-aaaa", time.Hour, gpu.DefaultThrottleMask).Stop()
	if len(short.Series) != short.Samples || short.Samples != 2 {
		t.Errorf("a short run's series = %d points of %d readings, want both readings", len(short.Series), short.Samples)
	}
}
