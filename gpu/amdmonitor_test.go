package gpu_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kernelbox/gpu"
	"kernelbox/gpu/gputest"
)

// amdTree is a writable copy of the MI325X host of testdata/amd, with its
// inventory.
func amdTree(t *testing.T) (string, gpu.GPU) {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join("testdata", "amd"))); err != nil {
		t.Fatal(err)
	}
	inv := gpu.Discover(t.Context(), gpu.Options{NVML: &gputest.NVML{InitErr: gpu.ErrNotSupported}, Root: root})
	for _, g := range inv.GPUs {
		if g.PCI == "0000:05:00.0" {
			return root, g
		}
	}
	t.Fatalf("no GPU at 0000:05:00.0 in %+v", inv)
	return "", gpu.GPU{}
}

// TestAMDMonitor: the monitor over amdgpu's sysfs reads junction
// temperature, power, the current sclk level and VRAM; counts only the
// KFD processes on this GPU; locks with profile_standard, sees the level
// dropped (a GPU reset) and sets it again; reports new uncorrectable RAS
// errors; and sets auto at Close.
func TestAMDMonitor(t *testing.T) {
	t.Parallel()
	root, g := amdTree(t)
	dev := filepath.Join(root, "sys/bus/pci/devices", g.PCI)
	m, err := gpu.OpenMonitor(gpu.NewAMDSysfs(root, []gpu.GPU{g}))
	if err != nil {
		t.Fatal(err)
	}
	tel, err := m.Read(g.UUID)
	if err != nil || tel.TempC != 52 || tel.PowerMW != 301000 || tel.SMClockMHz != 1300 || tel.MemUsed != 1<<30 || tel.Processes != 0 {
		t.Errorf("Read = %+v, %v; want 52 °C, 301 W, 1300 MHz, 1 GiB, no process (4242 is on the other GPU)", tel, err)
	}
	if top, err := m.MaxSMClock(g.UUID); err != nil || top != 2100 {
		t.Errorf("MaxSMClock = %d, %v; want 2100", top, err)
	}
	write := func(rel, s string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	level := func() string {
		b, _ := os.ReadFile(filepath.Join(dev, "power_dpm_force_performance_level"))
		return strings.TrimSpace(string(b))
	}
	write("sys/class/kfd/kfd/proc/777/vram_41204", "4096\n")
	if tel, _ := m.Read(g.UUID); tel.Processes != 1 {
		t.Errorf("with a process on this GPU: %d processes, want 1", tel.Processes)
	}
	if err := os.RemoveAll(filepath.Join(root, "sys/class/kfd/kfd/proc/777")); err != nil {
		t.Fatal(err)
	}

	if err := m.LockClocks(g.UUID, 0, 0); err != nil || level() != "profile_standard" {
		t.Fatalf("LockClocks = %v, level %q; want profile_standard", err, level())
	}
	cfg := gpu.GateConfig{Wait: time.Second, Poll: time.Millisecond, MemorySlack: 1 << 30}
	if _, err := m.Gate(t.Context(), g.UUID, cfg); err != nil || m.Relocks.Load() != 0 {
		t.Fatalf("gate under profile_standard = %v, %d relocks", err, m.Relocks.Load())
	}
	write("sys/bus/pci/devices/"+g.PCI+"/power_dpm_force_performance_level", "auto\n") // a reset
	if _, err := m.Gate(t.Context(), g.UUID, cfg); err != nil || m.Relocks.Load() != 1 || level() != "profile_standard" {
		t.Errorf("gate after a reset = %v, %d relocks, level %q; want profile_standard again", err, m.Relocks.Load(), level())
	}

	if p, err := m.Health(g.UUID); err != nil || len(p) != 0 {
		t.Errorf("Health = %q, %v; want nothing wrong", p, err)
	}
	write("sys/bus/pci/devices/"+g.PCI+"/ras/umc_err_count", "ue: 2\nce: 9\n")
	if p, _ := m.Health(g.UUID); len(p) != 1 || !strings.Contains(p[0], "2 new uncorrectable ECC errors") {
		t.Errorf("Health after 2 RAS errors = %q", p)
	}
	if m.XidErr == nil {
		t.Error("XidErr = nil; amdgpu has no Xid events and the monitor should say so")
	}
	if err := m.Close(); err != nil || level() != "auto" {
		t.Errorf("Close = %v, level %q; want auto", err, level())
	}
}
