package gpu

import (
	"runtime"
	"sync"
	"time"
)

// The CPU backend has no datasheet: its ceiling is this host's copy
// bandwidth, measured. A ceiling must over-estimate, since one below what
// a kernel can reach puts an honest kernel under the floor.
//
// The copy is cache-resident, not of a buffer larger than any cache: the
// CPU harness flushes no cache and clones a case's inputs just before the
// timed call, so a case that fits in cache is read from it, several times
// faster than DRAM allows (280 against 54 GB/s on two EPYC cores). A
// DRAM figure would flag an honest kernel on such a case; cache bandwidth
// still puts a time faked to near zero far under the floor.
const (
	// cpuHeadroom covers what Go's copy does not reach: a tuned kernel
	// (wider vectors, every SMT thread, data in L1) moves bytes faster,
	// and the host may have been busy while we measured.
	cpuHeadroom = 2
	// cacheBytes is each worker's buffer: source and destination (128 KiB)
	// fit in any L2 of the last fifteen years, not in L1.
	cacheBytes = 64 << 10
	// cacheRepeats copies make one round 64 MiB a worker, milliseconds:
	// long enough to time.
	cacheRepeats = 1024
	copyRounds   = 10
)

var cpuPeak = sync.OnceValue(func() Peak {
	return Peak{BytesPerSec: cpuHeadroom * measureCopyBandwidth(runtime.GOMAXPROCS(0))}
})

// CPUPeak is the CPU backend's ceiling: this host's memory bandwidth,
// measured on the first call (tens of milliseconds) and the same for the
// rest of the process. The daemon calls it at start, before any run it
// could slow or be slowed by. Its throughputs are 0: the CPU's FLOP/s are
// unknown, so it gives no FLOPs floor.
func CPUPeak() Peak { return cpuPeak() }

// measureCopyBandwidth is the best rate, in bytes a floor counts per
// second (each copied byte read once and written once), of workers
// goroutines each copying its own buffer over and over at once: a kernel
// on the CPU backend uses every core it is given.
func measureCopyBandwidth(workers int) float64 {
	workers = max(workers, 1)
	bufs := make([][2][]byte, workers)
	for w := range bufs {
		bufs[w] = [2][]byte{make([]byte, cacheBytes), make([]byte, cacheBytes)}
		for i := range bufs[w][0] {
			bufs[w][0][i] = byte(i) // real pages, not the shared zero page
		}
	}
	round := func() time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for w := range workers {
			wg.Go(func() {
				for range cacheRepeats {
					copy(bufs[w][1], bufs[w][0])
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	round() // untimed: faults the pages in and warms the caches
	best := round()
	for range copyRounds - 1 {
		best = min(best, round())
	}
	return 2 * float64(cacheBytes*cacheRepeats*workers) / max(best, time.Nanosecond).Seconds()
}
