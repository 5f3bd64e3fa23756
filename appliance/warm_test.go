package appliance

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/gpu/gputest"
	"kernelbox/problems"
)

// TestDaemon_WarmStart: on a box with one (fake) GPU, the job behind a
// running one is claimed and its run started while the GPU is busy, and
// its harness still gets the GPU only once the first run has ended. With
// warm starts off, the second run starts only after the first.
func TestDaemon_WarmStart(t *testing.T) {
	t.Parallel()
	for _, warm := range []bool{true, false} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			t.Parallel()
			td := startDaemonWith(t, t.TempDir(), func(c *Config) { c.CPUSlots, c.GPUs, c.WarmStart = 0, "auto", warm }, func(d *Daemon) {
				d.nvml = &gputest.NVML{Driver: "580.0", GPUs: []gputest.GPU{
					{Name: "NVIDIA H200", UUID: "GPU-aaaa", Minor: 0, PCI: "00000000:00:06.0", NUMA: -1},
				}}
				d.gpuRoot = filepath.Join("..", "gpu", "testdata", "nvidia")
			})
			td.loadQuickOn("[H200]")
			ctx := t.Context()
			// Each prints when its harness began, in Unix milliseconds.
			code := func(sleep int) []byte {
				return fmt.Appendf(nil, "import time\nprint('BEGAN', int(time.time() * 1000))\nSLEEP = %d\n"+
					"def custom_kernel(xs):\n    return [2 * x for x in xs]\n", sleep)
			}
			var views []*api.SubmissionView
			var ids []int64
			for _, sleep := range []int{2, 0} {
				sub, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", GPU: "H200", Mode: "test", Code: code(sleep)})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, sub.ID)
			}
			for _, id := range ids {
				v, err := td.admin.Wait(ctx, id, nil)
				if err != nil || !v.Passed || len(v.Runs) != 1 || v.Runs[0].GPUID != "GPU-aaaa" {
					t.Fatalf("submission %d: %+v, %v; want passed, one run on GPU-aaaa", id, v, err)
				}
				views = append(views, v)
			}
			first, second := views[0].Runs[0], views[1].Runs[0]
			began := beganAt(t, second.Report)
			// Whether warm or not, the second harness began once the first run had ended.
			if began.Before(first.Finished) {
				t.Errorf("the second harness began at %v, before the first run ended at %v", began, first.Finished)
			}
			if claimedEarly := second.Started.Before(first.Finished); claimedEarly != warm {
				t.Errorf("second run started %v, first finished %v: claimed while the GPU was busy = %v, want %v",
					second.Started, first.Finished, claimedEarly, warm)
			}
		})
	}
}

// beganAt is when a quick-problem run's harness printed BEGAN.
func beganAt(t *testing.T, report json.RawMessage) time.Time {
	t.Helper()
	var rep problems.Report
	if err := json.Unmarshal(report, &rep); err != nil || len(rep.Phases) == 0 {
		t.Fatalf("report: %v", err)
	}
	_, rest, ok := strings.Cut(rep.Phases[0].Stdout, "BEGAN ")
	ms, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]), 10, 64)
	if !ok || err != nil {
		t.Fatalf("stdout %q has no BEGAN line", rep.Phases[0].Stdout)
	}
	return time.UnixMilli(ms)
}
