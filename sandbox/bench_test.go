//go:build linux

package sandbox

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"

	"kernelbox/policies"
)

// BenchmarkOverhead compares a run of /bin/true in the sandbox with the
// same command started directly, in the same process and run, so the
// ratio holds whatever machine it is on:
//
//	go test -tags seccomp -run XXX -bench Overhead ./sandbox
//
// The sandbox's cost is the difference of the two; its median is reported
// as median-ms (target: under 30 ms on CI's machine).
func BenchmarkOverhead(b *testing.B) {
	if os.Geteuid() != 0 || !seccompBuilt {
		b.Skip("needs root and the seccomp build tag")
	}
	r, err := NewRuntime(b.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	l := policies.DefaultLimits()
	l.WallTime = 10 * time.Second
	spec := Spec{Args: []string{"/bin/true"}, Env: []string{"PATH=/usr/bin:/bin"}, Binds: DefaultBinds(), Limits: l}
	b.Run("sandbox", func(b *testing.B) {
		times := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			res, err := r.Run(b.Context(), spec)
			if err != nil || res.Verdict != VerdictOK {
				b.Fatalf("Run() = %+v, %v", res, err)
			}
			times = append(times, time.Since(start))
		}
		reportMedian(b, times)
	})
	b.Run("exec", func(b *testing.B) {
		times := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(start))
		}
		reportMedian(b, times)
	})
}

func reportMedian(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "median-ms")
}
