package gpu_test

import (
	"testing"

	"kernelbox/gpu"
)

// TestCPUPeak: the measured ceiling is a plausible memory bandwidth, has
// no throughputs (no FLOPs floor on the CPU), and is measured once: two
// measurements of a real host never agree to the last bit, so equal
// figures mean the second call read the first's.
func TestCPUPeak(t *testing.T) {
	t.Parallel()
	p := gpu.CPUPeak()
	// From a slow VM's single channel to beyond any socket's cache, twice.
	if p.BytesPerSec < 1e8 || p.BytesPerSec > 1e14 {
		t.Errorf("CPUPeak().BytesPerSec = %g, want between 100 MB/s and 100 TB/s", p.BytesPerSec)
	}
	if p.BF16PerSec != 0 || p.Int8PerSec != 0 {
		t.Errorf("CPUPeak() = %+v, want no throughputs", p)
	}
	if again := gpu.CPUPeak(); again != p {
		t.Errorf("CPUPeak() = %+v, then %+v; want the first measurement again", p, again)
	}
}
