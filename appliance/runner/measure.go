package runner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"kernelbox/gpu"
	"kernelbox/policies"
	"kernelbox/problems"
)

// MeasureConfig makes ranked timings comparable: a pre-flight gate before
// every timed run on a GPU, telemetry across it, a retry when the GPU
// throttled, and locked clocks where the operator asks for them.
type MeasureConfig struct {
	Gate     bool          `yaml:"gate"`
	MaxTempC uint32        `yaml:"max_temp_c"`
	Wait     time.Duration `yaml:"wait"`
	// MemorySlack is how far above its idle baseline a GPU's used memory
	// may be before a run (like 512M).
	MemorySlack policies.ByteSize `yaml:"memory_slack"`
	SampleEvery time.Duration     `yaml:"sample_every"`
	// ThrottleMask are the clock-event reasons that void a run; 0 for the
	// default (hardware slowdown, thermal, power brake).
	ThrottleMask uint64 `yaml:"throttle_mask"`
	// HealthWait is how long a GPU has after a job to shed the run's
	// processes and memory before it is drained.
	HealthWait time.Duration `yaml:"health_wait"`
	// Clocks lock a GPU type's SM clock: "1500" or "1400-1600" MHz, or
	// "standard" for AMD's profile_standard (which an AMD GPU gets for any
	// entry). Types without an entry keep the driver's default.
	Clocks map[string]ClockSetting `yaml:"clocks"`
	// Ceilings are a GPU type's peak rates for the problems' physics
	// floors, over the datasheet figures kernelbox knows (gpu.PeakOf) and,
	// for the cpu type, the bandwidth measured at start (gpu.CPUPeak); a
	// GPU type with neither has no floor. An entry replaces them whole: a
	// read floor needs its read_bytes_per_s.
	Ceilings map[string]problems.Ceilings `yaml:"ceilings"`
	// FloorSlack is the fraction of a physics floor a time may reach
	// before the run is flagged (0: problems.DefaultFloorSlack).
	FloorSlack float64 `yaml:"floor_slack"`
	// TieFloor is the least half-width of a ranked score's interval, as a
	// fraction of the score: the spread between runs of one kernel that a
	// run's own standard error does not see (0.45-0.66 % CV of the score
	// on an H100, docs/history/gpu-runs.md). Entries whose intervals overlap are
	// statistical ties.
	TieFloor float64 `yaml:"tie_floor"`
}

// ceilings are the peak rates a slot's times are held to, or nil: the
// config's for the slot's type, else a known GPU's datasheet, else on a
// CPU slot this host's measured bandwidth.
func (m MeasureConfig) ceilings(slot Slot) *problems.Ceilings {
	if c, ok := m.Ceilings[slot.GPUType]; ok {
		return &c
	}
	if slot.GPU == nil {
		return cpuCeilings()
	}
	p, ok := gpu.PeakOf(gpu.TypeOf(slot.GPU.Name, nil))
	if !ok {
		return nil
	}
	return floorCeilings(p)
}

// measuresCPU says whether a CPU slot's ceiling is the measured one, which
// the daemon then takes at start.
func (m MeasureConfig) MeasuresCPU(slots []Slot) bool {
	for _, s := range slots {
		if _, set := m.Ceilings[s.GPUType]; s.GPU == nil && !set {
			return true
		}
	}
	return false
}

// LocalCeilings are the peak rates `kernelbox eval` holds a harness's
// timings to, as the daemon would on a slot of this host: on the CPU
// backend (device cpu) the measured bandwidth, on a GPU its model's
// datasheet. inv is the host's GPUs (gpu.Discover): the harness may pick
// any of them, so they must all be one known model. from says where the
// ceilings come from, or why there are none.
func LocalCeilings(device string, inv gpu.Inventory) (ce *problems.Ceilings, from string) {
	if device == "cpu" {
		ce := cpuCeilings()
		return ce, fmt.Sprintf("this host's measured bandwidth (%.1f GB/s, twice its best copy)", ce.BytesPerSec/1e9)
	}
	var models []string
	for _, g := range inv.GPUs {
		if t := gpu.TypeOf(g.Name, nil); !slices.Contains(models, t) {
			models = append(models, t)
		}
	}
	switch {
	case len(models) == 0:
		return nil, "none: no GPU found (" + strings.Join(inv.Notes, "; ") + ")"
	case len(models) > 1:
		return nil, "none: the harness may pick any of this host's GPUs, of models " + strings.Join(models, ", ")
	}
	p, ok := gpu.PeakOf(models[0])
	if !ok {
		return nil, fmt.Sprintf("none: kernelbox knows no datasheet figures for the %s", models[0])
	}
	return floorCeilings(p), fmt.Sprintf("the %s datasheet (%.2f TB/s, %.0f TFLOP/s bf16)", models[0], p.BytesPerSec/1e12, p.BF16PerSec/1e12)
}

// floorCeilings are a GPU's datasheet peak as the problems' floors read
// it. Its bandwidth also bounds reads (the read floor, with no slack)
// unless a memory-side cache sits in front of it: the judge's flush is
// sized by L2 (at least 256 MB), which may leave a case's inputs in a
// 256 MB Infinity Cache, read from it faster than the datasheet's HBM.
func floorCeilings(p gpu.Peak) *problems.Ceilings {
	ce := &problems.Ceilings{BytesPerSec: p.BytesPerSec, BF16PerSec: p.BF16PerSec, Int8PerSec: p.Int8PerSec}
	if p.MemoryCacheBytes == 0 {
		ce.ReadBytesPerSec = p.BytesPerSec
	}
	return ce
}

// cpuCeilings are the CPU backend's: this host's measured bandwidth
// (gpu.CPUPeak), and no read ceiling, since the CPU judge flushes no
// cache before a call.
func cpuCeilings() *problems.Ceilings {
	return &problems.Ceilings{BytesPerSec: gpu.CPUPeak().BytesPerSec}
}

func (m MeasureConfig) gateConfig() gpu.GateConfig {
	return gpu.GateConfig{MaxTempC: m.MaxTempC, Wait: m.Wait, MemorySlack: uint64(m.MemorySlack), ThrottleMask: m.throttleMask()}
}

func (m MeasureConfig) throttleMask() uint64 {
	if m.ThrottleMask == 0 {
		return gpu.DefaultThrottleMask
	}
	return m.ThrottleMask
}

// ClockSetting is one entry of measurement.clocks, read once from the
// config: an SM clock range in MHz ("1500", "1400-1600"), or Standard,
// AMD's profile_standard level ("standard"), which an AMD GPU gets for
// any entry.
type ClockSetting struct {
	Standard bool
	Lo, Hi   uint32
}

// UnmarshalText reads "standard", "1500" or "1400-1600".
func (c *ClockSetting) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	if s == "standard" {
		*c = ClockSetting{Standard: true}
		return nil
	}
	bad := fmt.Errorf("clock %q: want MHz like 1500 or 1400-1600, or standard", s)
	a, b, isRange := strings.Cut(s, "-")
	x, err := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	if err != nil || x == 0 {
		return bad
	}
	y := x
	if isRange {
		if y, err = strconv.ParseUint(strings.TrimSpace(b), 10, 32); err != nil || y < x {
			return bad
		}
	}
	*c = ClockSetting{Lo: uint32(x), Hi: uint32(y)}
	return nil
}

// MarshalText writes the setting the way the config holds it.
func (c ClockSetting) MarshalText() ([]byte, error) {
	switch {
	case c.Standard:
		return []byte("standard"), nil
	case c.Lo == c.Hi:
		return []byte(strconv.FormatUint(uint64(c.Lo), 10)), nil
	}
	return []byte(fmt.Sprintf("%d-%d", c.Lo, c.Hi)), nil
}
