package gpu

// Peak is a GPU model's datasheet peak (or the CPU backend's measured
// one, CPUPeak): memory bandwidth and dense (not sparse) tensor-core
// throughput. No kernel beats it, so with a problem's bytes and operations
// per case it gives the least time a correct kernel can take; a ranked
// time far below that is a broken timer or a cheat.
type Peak struct {
	BytesPerSec float64 // HBM or GDDR bandwidth; the CPU's, measured
	BF16PerSec  float64 // dense fp16/bf16 tensor FLOP/s
	Int8PerSec  float64 // dense int8 (or fp8, the larger) tensor op/s
	// MemoryCacheBytes is a memory-side cache past L2 (AMD's Infinity
	// Cache), 0 for none. It serves reads several times faster than
	// BytesPerSec, and a flush sized by L2 may leave data in it: there
	// BytesPerSec does not bound a read of data flushed from L2.
	MemoryCacheBytes uint64
}

// peaks are vendors' published figures for the fastest form of a model
// where there are several (the safe bound), field by field: the SXM or OAM
// part's throughput, and its bandwidth unless another form's is higher.
// TypeOf names every form alike (an H100 NVL is an "H100"), so a figure
// below any form's would put an honest kernel on that form under the floor.
var peaks = map[string]Peak{
	"A100": {2.039e12, 312e12, 624e12, 0},
	// The H100 NVL's HBM3 (3.9 TB/s) is faster than the SXM's (3.35 TB/s);
	// the SXM's tensor cores are the faster.
	"H100":   {3.9e12, 989e12, 1979e12, 0},
	"H200":   {4.8e12, 989e12, 1979e12, 0},
	"H20":    {4.0e12, 148e12, 296e12, 0},
	"GH200":  {4.9e12, 989e12, 1979e12, 0},
	"B200":   {8e12, 2250e12, 4500e12, 0},
	"L40S":   {0.864e12, 362e12, 733e12, 0},
	"L4":     {0.3e12, 121e12, 242e12, 0},
	"MI250X": {3.2e12, 383e12, 383e12, 0},
	"MI300X": {5.3e12, 1307e12, 2615e12, 256 << 20},
	"MI325X": {6e12, 1307e12, 2615e12, 256 << 20},
	"MI355X": {8e12, 2500e12, 5000e12, 256 << 20},
}

// PeakOf returns the datasheet peak of a GPU model named as TypeOf names
// it without aliases (H200, MI300X).
func PeakOf(model string) (Peak, bool) {
	p, ok := peaks[model]
	return p, ok
}
