package appliance

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/internal/testutil"
	"kernelbox/problems"
)

// benchDaemon starts a daemon for a benchmark: the quick problem, users
// enough that no queued-job cap is hit.
func benchDaemon(b *testing.B, slots int) (*testDaemon, []*api.Client, []byte) {
	b.Helper()
	td := startDaemon(b, b.TempDir(), func(c *Config) {
		c.CPUSlots = slots
		c.MaxQueuedPerUser = 100000
		c.RateLimits = map[string]int{}
	})
	td.loadQuick()
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		b.Fatal(err)
	}
	var clients []*api.Client
	for i := range 8 {
		c, _ := td.user(fmt.Sprintf("bench%d", i))
		clients = append(clients, c)
	}
	return td, clients, code
}

// BenchmarkDaemon_Accept measures submissions accepted per second through
// the HTTP API (checks, store, enqueue; FULL synchronous commits), from 8
// users at once, while the runner works through them.
func BenchmarkDaemon_Accept(b *testing.B) {
	td, clients, code := benchDaemon(b, 2)
	ctx := b.Context()
	var next sync.Mutex
	n := 0
	b.ResetTimer()
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				if n >= b.N {
					next.Unlock()
					return
				}
				n++
				next.Unlock()
				if _, err := c.Submit(ctx, api.SubmitRequest{Code: code, Mode: "test"}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "submissions/s")
	b.StopTimer()
	td.stop()
}

// BenchmarkDaemon_IdleGap measures how long one slot sits idle between two
// jobs when the queue is full: from one run's result being stored to the
// next run being started on the same slot (claim, lease, load). Target:
// under 50 ms.
func BenchmarkDaemon_IdleGap(b *testing.B) {
	td, clients, code := benchDaemon(b, 1)
	ctx := b.Context()
	jobs := b.N + 1
	var ids []int64
	for i := range jobs {
		sub, err := clients[i%len(clients)].Submit(ctx, api.SubmitRequest{Code: code, Mode: "test"})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, sub.ID)
	}
	type span struct{ start, end time.Time }
	var spans []span
	for _, id := range ids {
		v, err := td.admin.Wait(ctx, id, nil)
		if err != nil {
			b.Fatal(err)
		}
		spans = append(spans, span{v.Runs[0].Started, v.Runs[0].Finished})
	}
	b.StopTimer()
	slices.SortFunc(spans, func(x, y span) int { return x.start.Compare(y.start) })
	var gaps []float64
	for i := 1; i < len(spans); i++ {
		gaps = append(gaps, float64(spans[i].start.Sub(spans[i-1].end).Microseconds())/1000)
	}
	if len(gaps) == 0 {
		return
	}
	slices.Sort(gaps)
	sum := 0.0
	for _, g := range gaps {
		sum += g
	}
	b.ReportMetric(sum/float64(len(gaps)), "gap-mean-ms")
	b.ReportMetric(gaps[len(gaps)/2], "gap-p50-ms")
	b.ReportMetric(gaps[len(gaps)-1], "gap-max-ms")
	td.stop()
}

// BenchmarkEndToEnd measures what the box adds to a run on the CPU
// backend: the bundled vectoradd's correct solution through the daemon
// (submit, queue, sandbox, harness, store, long-poll to the result)
// against the bare harness on the same host (problems.Evaluate with the
// plain process launcher), alternated in one run, in test and leaderboard
// mode. It reports each mean and their ratio; issue 17's target for test
// mode is a ratio of at most 1.3. vectoradd runs on our judge, which
// draws ranked seeds itself, so leaderboard mode has no secret-seed twin
// on either side.
func BenchmarkEndToEnd(b *testing.B) {
	td := startDaemon(b, b.TempDir(), func(c *Config) {
		c.CPUSlots = 1
		c.MaxQueuedPerUser = 100000
		c.RateLimits = map[string]int{}
	})
	if _, errOut, code := td.cli(td.token, "admin", "problems", "load", lib(problems.LibraryCompetition)); code != 0 {
		b.Fatalf("load the library: exit %d: %s", code, errOut)
	}
	task, err := problems.LoadTask(lib("vectoradd"))
	if err != nil {
		b.Fatal(err)
	}
	code, err := os.ReadFile(lib("vectoradd", "solutions", "correct", "chunked_add.py"))
	if err != nil {
		b.Fatal(err)
	}
	it := testutil.RequireTorch(b)
	for _, mode := range []problems.Mode{problems.ModeTest, problems.ModeLeaderboard} {
		b.Run(string(mode), func(b *testing.B) {
			ctx := b.Context()
			var bare, daemon time.Duration
			for range b.N {
				begin := time.Now()
				rep, err := problems.Evaluate(ctx, problems.ExecLauncher{}, task, problems.EvalOptions{Mode: mode,
					Python: it.Path, Device: it.Device, Env: os.Environ(), WorkDir: b.TempDir(), Submission: code})
				if err != nil || !rep.Passed {
					b.Fatalf("bare harness: %+v, %v", rep, err)
				}
				bare += time.Since(begin)

				begin = time.Now()
				sub, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "vectoradd", GPU: "cpu", Mode: string(mode), Code: code})
				if err != nil {
					b.Fatal(err)
				}
				v, err := td.admin.Wait(ctx, sub.ID, nil)
				if err != nil || !v.Passed {
					b.Fatalf("through the daemon: %+v, %v", v, err)
				}
				daemon += time.Since(begin)
			}
			n := float64(b.N)
			b.ReportMetric(bare.Seconds()/n, "bare-s/op")
			b.ReportMetric(daemon.Seconds()/n, "daemon-s/op")
			b.ReportMetric(daemon.Seconds()/bare.Seconds(), "x-vs-bare")
		})
	}
	td.stop()
}

// BenchmarkDaemon_Standby: a test-mode submission of vectoradd's torch
// template to an idle (fake, CPU-backed) GPU, submit to result, with a
// standby harness waiting there against a daemon without standbys,
// alternated in one run. Between submissions each daemon is left idle
// long enough for its standby to be ready (a contestant reads the last
// result), which is not timed. The ratio is what a standby saves of a
// test run on this host; on the GPU machine bench/gpu.sh's latency and
// cold parts measure it with CUDA (docs/performance.md).
func BenchmarkDaemon_Standby(b *testing.B) {
	on, off := fakeH200Daemon(b, true), fakeH200Daemon(b, false)
	lib := loadVectoraddOnH200(b, on)
	loadVectoraddOnH200(b, off)
	code, err := os.ReadFile(filepath.Join(lib, "vectoradd", "templates", "torch.py"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	submit := func(td *testDaemon) time.Duration {
		time.Sleep(4 * time.Second) // idle: the standby imports torch and waits
		begin := time.Now()
		sub, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "vectoradd", GPU: "H200", Mode: "test", Code: code})
		if err != nil {
			b.Fatal(err)
		}
		if v, err := td.admin.Wait(ctx, sub.ID, nil); err != nil || !v.Passed {
			b.Fatalf("%+v, %v", v, err)
		}
		return time.Since(begin)
	}
	var with, without time.Duration
	b.ResetTimer()
	for range b.N {
		with += submit(on)
		without += submit(off)
	}
	if on.d.runner.Handed() != int64(b.N) || off.d.runner.Handed() != 0 {
		b.Fatalf("runs handed to a standby: %d with standbys, %d without; want %d and 0", on.d.runner.Handed(), off.d.runner.Handed(), b.N)
	}
	n := float64(b.N)
	b.ReportMetric(with.Seconds()/n, "standby-s/op")
	b.ReportMetric(without.Seconds()/n, "cold-s/op")
	b.ReportMetric(with.Seconds()/without.Seconds(), "x-vs-cold")
}
