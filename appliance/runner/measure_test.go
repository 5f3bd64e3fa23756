package runner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernelbox/gpu"
	"kernelbox/problems"
)

func TestCPUSlots(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		cpus []int
		want []string
	}{
		{2, []int{0, 1}, []string{"0", "1"}},
		{2, []int{0, 1, 2, 3}, []string{"0,1", "2,3"}},
		{3, []int{4, 5, 6, 7, 9, 11, 12}, []string{"4,5", "6,7", "9,11"}},
		{4, []int{0, 1}, []string{"", "", "", ""}}, // more slots than CPUs: they share
	} {
		var got []string
		for _, s := range CPUSlots(tc.n, tc.cpus) {
			got = append(got, s.Cpuset)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("CPUSlots(%d, %d) cpusets = %q, want %q", tc.n, tc.cpus, got, tc.want)
		}
	}
}

// TestMeasureConfig_Ceilings: a slot's ceilings are the config's for its
// type, else a known GPU's datasheet, else on a CPU slot the measured
// bandwidth; an unknown GPU has none.
func TestMeasureConfig_Ceilings(t *testing.T) {
	t.Parallel()
	cpu := Slot{ID: "cpu:0", GPUType: "cpu", Device: "cpu"}
	h100 := Slot{ID: "GPU-a", GPUType: "H100-SXM", Device: "cuda", GPU: &gpu.GPU{Name: "NVIDIA H100 80GB HBM3"}}
	odd := Slot{ID: "GPU-b", GPUType: "X1", Device: "cuda", GPU: &gpu.GPU{Name: "Acme X1"}}
	set := problems.Ceilings{BytesPerSec: 1e6}
	measured := gpu.CPUPeak()
	h, _ := gpu.PeakOf("H100")
	mi300x := Slot{ID: "GPU-c", GPUType: "MI300X", Device: "cuda", GPU: &gpu.GPU{Name: "AMD Instinct MI300X"}}
	mi, _ := gpu.PeakOf("MI300X")
	for _, tt := range []struct {
		name     string
		ceilings map[string]problems.Ceilings
		slot     Slot
		want     *problems.Ceilings
		measures bool // measuresCPU of the slot alone
	}{
		{"cpu measured", nil, cpu, &problems.Ceilings{BytesPerSec: measured.BytesPerSec}, true},
		{"cpu from the config", map[string]problems.Ceilings{"cpu": set}, cpu, &set, false},
		{"known GPU", nil, h100, &problems.Ceilings{BytesPerSec: h.BytesPerSec, BF16PerSec: h.BF16PerSec, Int8PerSec: h.Int8PerSec, ReadBytesPerSec: h.BytesPerSec}, false},
		// The judge's flush may leave inputs in its Infinity Cache: no read floor.
		{"memory-side cache", nil, mi300x, &problems.Ceilings{BytesPerSec: mi.BytesPerSec, BF16PerSec: mi.BF16PerSec, Int8PerSec: mi.Int8PerSec}, false},
		{"GPU from the config", map[string]problems.Ceilings{"X1": set}, odd, &set, false},
		{"unknown GPU", nil, odd, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := MeasureConfig{Ceilings: tt.ceilings}
			if diff := cmp.Diff(tt.want, m.ceilings(tt.slot)); diff != "" {
				t.Errorf("ceilings(%s) mismatch (-want +got):\n%s", tt.slot.ID, diff)
			}
			if got := m.MeasuresCPU([]Slot{tt.slot}); got != tt.measures {
				t.Errorf("measuresCPU([%s]) = %v, want %v", tt.slot.ID, got, tt.measures)
			}
		})
	}
	if measured.BytesPerSec <= 0 {
		t.Errorf("gpu.CPUPeak() = %+v, want a bandwidth: a CPU slot would have no floor", measured)
	}
}

// TestLocalCeilings: eval's ceilings are the measured ones on the CPU
// backend, and on a GPU the datasheet only when every GPU of the host is
// one known model, since the harness may pick any.
func TestLocalCeilings(t *testing.T) {
	t.Parallel()
	gpus := func(names ...string) gpu.Inventory {
		inv := gpu.Inventory{Notes: []string{"NVIDIA: no driver"}}
		for _, n := range names {
			inv.GPUs = append(inv.GPUs, gpu.GPU{Name: n})
		}
		return inv
	}
	h, _ := gpu.PeakOf("H200")
	for _, tt := range []struct {
		name   string
		device string
		inv    gpu.Inventory
		want   *problems.Ceilings
		from   string
	}{
		{"cpu", "cpu", gpus(), &problems.Ceilings{BytesPerSec: gpu.CPUPeak().BytesPerSec}, "this host's measured bandwidth"},
		{"one model", "cuda", gpus("NVIDIA H200", "NVIDIA H200"), &problems.Ceilings{BytesPerSec: h.BytesPerSec, BF16PerSec: h.BF16PerSec, Int8PerSec: h.Int8PerSec, ReadBytesPerSec: h.BytesPerSec}, "the H200 datasheet"},
		{"two models", "cuda", gpus("NVIDIA H200", "NVIDIA A100-SXM4-40GB"), nil, "none: the harness may pick any of this host's GPUs, of models H200, A100"},
		{"unknown model", "cuda", gpus("NVIDIA X1"), nil, "none: kernelbox knows no datasheet figures for the X1"},
		{"no GPU found", "cuda", gpus(), nil, "none: no GPU found (NVIDIA: no driver)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, from := LocalCeilings(tt.device, tt.inv)
			if diff := cmp.Diff(tt.want, got); diff != "" || !strings.HasPrefix(from, tt.from) {
				t.Errorf("LocalCeilings(%s, %d GPUs) = %+v, %q; want %+v, %q...\n%s", tt.device, len(tt.inv.GPUs), got, from, tt.want, tt.from, diff)
			}
		})
	}
}

func TestClockSetting_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"standard", "1500", "1400-1600"} {
		var c ClockSetting
		if err := c.UnmarshalText([]byte(s)); err != nil {
			t.Fatalf("UnmarshalText(%q): %v", s, err)
		}
		if got, _ := c.MarshalText(); string(got) != s {
			t.Errorf("MarshalText(UnmarshalText(%q)) = %q", s, got)
		}
	}
}
