package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/internal/testutil"
)

// EnvSlurm lets the slurm executor's end-to-end test use the Slurm
// cluster this machine runs. The test kills that cluster's slurmd, so it
// runs only where make slurm/check started a throwaway one (.ci/slurm.sh).
const EnvSlurm = "KERNELBOX_SLURM"

// requireSlurm skips unless a throwaway Slurm answers here.
func requireSlurm(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvSlurm) != "1" {
		t.Skip("needs a throwaway one-node Slurm: make slurm/check starts one (.ci/slurm.sh) and sets " + EnvSlurm + "=1")
	}
	if out, err := exec.Command("sinfo", "-h", "-o", "%T").CombinedOutput(); err != nil {
		t.Fatalf("%s=1 but sinfo fails: %v: %s", EnvSlurm, err, out)
	}
}

// freeAddr is a 127.0.0.1 port nothing listens on now: the coordinator's
// URL must be in its config before it listens.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startCoordinator is a daemon with the slurm executor over the test
// cluster's pool of two fake GPUs, served by the CPU backend on the node:
// its node side is this test binary running the real command line.
func startCoordinator(t testing.TB, more ...func(*Config)) *testDaemon {
	t.Helper()
	requireSlurm(t)
	return startCoordinatorWith(t, "", more...)
}

// startCoordinatorWith is startCoordinator on the Slurm its config names
// (slurm.bin: the fake's, slurmfake_test.go), with nodeMore appended to
// the node's config.
func startCoordinatorWith(t testing.TB, nodeMore string, more ...func(*Config)) *testDaemon {
	t.Helper()
	it := testutil.RequireTorch(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	nodeCfg := filepath.Join(dir, "node.yaml")
	body := fmt.Sprintf("data: %s\ngpus: none\npython: %s\ncgroup_parent: %s\nbudget: {memory: 8G, pids: 8000}\nlog_level: debug\n",
		filepath.Join(dir, "node"), it.Path, testCgroupParent(t)) + nodeMore
	if err := os.WriteFile(nodeCfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	return startDaemon(t, filepath.Join(dir, "coordinator"), func(c *Config) {
		c.Listen = addr
		c.Executor = ExecutorSlurm
		c.Library = true // a bundled problem's files reach beside its directory (../harness)
		c.LeaseTTL = 6 * time.Second
		c.Slurm.Coordinator = "http://" + addr
		c.Slurm.Pools = []SlurmPool{{GRES: "fake", GPUType: "cpu", GPUs: 2}}
		c.Slurm.Command = []string{"env", EnvCLI + "=1", exe, "-test.run=^$", "--"}
		c.Slurm.NodeConfig = nodeCfg
		c.Slurm.Poll = 500 * time.Millisecond
		c.Slurm.Output = filepath.Join(dir, "job-%j.out")
		t.Cleanup(func() { dumpJobOutputs(t, dir) })
		for _, f := range more {
			f(c)
		}
	})
}

func dumpJobOutputs(t testing.TB, dir string) {
	if !t.Failed() {
		return
	}
	files, _ := filepath.Glob(filepath.Join(dir, "job-*.out"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		t.Logf("%s:\n%s", filepath.Base(f), b)
	}
}

// slurmJobOf finds the Slurm job of a run by its comment, and its state.
func slurmJobOf(t *testing.T, run int64) (id, state string) {
	t.Helper()
	out, err := exec.Command("squeue", "-h", "--states=all", "--name=kernelbox", "-o", "%i|%k|%T").Output()
	if err != nil {
		t.Fatalf("squeue: %v", err)
	}
	last := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 || !strings.HasSuffix(f[1], fmt.Sprintf(":%d", run)) {
			continue
		}
		if n, _ := strconv.Atoi(f[0]); n > last { // the latest attempt's
			last, id, state = n, f[0], f[2]
		}
	}
	return id, state
}

func firstRun(t *testing.T, c *api.Client, sub int64) api.Run {
	t.Helper()
	var run api.Run
	waitFor(t, 30*time.Second, func() bool {
		s, err := c.Submission(t.Context(), sub, false)
		if err != nil || len(s.Runs) == 0 {
			return false
		}
		run = s.Runs[0]
		return true
	})
	return run
}

// passThrough submits code in mode and waits for it to pass, handing its
// events to seen; nil, with the test failed, when it does not.
func passThrough(t *testing.T, c *api.Client, code []byte, mode string, seen func(api.Event)) *api.SubmissionView {
	t.Helper()
	ctx := t.Context()
	sub, err := c.Submit(ctx, api.SubmitRequest{Code: code, FileName: "double.py", Mode: mode})
	if err != nil {
		t.Errorf("%s: Submit: %v", mode, err)
		return nil
	}
	final, err := c.Wait(ctx, sub.ID, seen)
	if err != nil || final.Status != api.StatusDone || !final.Passed {
		t.Errorf("%s through Slurm: %+v, %v", mode, final, err)
		return nil
	}
	if mode == "leaderboard" && final.Score == nil {
		t.Errorf("a ranked run passed without a score")
	}
	return final
}

// slowSubmission is a test run of the quick problem that takes seconds.
func slowSubmission(t *testing.T, c *api.Client, seconds int) int64 {
	t.Helper()
	code := fmt.Sprintf("#!POPCORN leaderboard quick\nSLEEP = %d\ndef custom_kernel(xs):\n    return [2 * x for x in xs]\n", seconds)
	sub, err := c.Submit(t.Context(), api.SubmitRequest{Code: []byte(code), FileName: "slow.py", Mode: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return sub.ID
}

func TestSlurm_EndToEnd(t *testing.T) {
	td := startCoordinator(t, func(c *Config) {
		// The job runs under the packaged unit's umask, as sbatch from a
		// coordinator the unit started hands it (SLURM_UMASK): the node's
		// runs must not depend on it.
		c.Slurm.Command = append([]string{"/bin/sh", "-c", `umask 0077 && exec "$@"`, "sh"}, c.Slurm.Command...)
	})
	td.loadQuick()
	ctx := t.Context()
	fast, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("several users", func(t *testing.T) {
		var wg sync.WaitGroup
		for i, mode := range []string{"test", "leaderboard", "test"} {
			c, _ := td.user(fmt.Sprintf("user%d", i))
			wg.Add(1)
			go func() {
				defer wg.Done()
				final := passThrough(t, c, fast, mode, nil)
				if final == nil {
					return
				}
				for _, r := range final.Runs {
					if r.Secret {
						continue // its owner does not see where it ran
					}
					var info map[string]any
					_ = json.Unmarshal(r.SystemInfo, &info)
					if info["slurm_job"] == nil || info["node"] == nil {
						t.Errorf("user%d run %d: system info %s names no Slurm job and node", i, r.ID, r.SystemInfo)
					}
				}
			}()
		}
		// A bundled problem, whose harness lies beside its directory, with
		// PyTorch on the node.
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _ := td.user("torchuser")
			code, err := os.ReadFile(lib("vectoradd", "solutions", "correct", "chunked_add.py"))
			if err != nil {
				t.Error(err)
				return
			}
			sub, err := c.Submit(ctx, api.SubmitRequest{Leaderboard: "vectoradd", GPU: "cpu", Code: code, FileName: "chunked_add.py", Mode: "test"})
			if err != nil {
				t.Errorf("vectoradd: Submit: %v", err)
				return
			}
			if final, err := c.Wait(ctx, sub.ID, nil); err != nil || !final.Passed {
				t.Errorf("vectoradd through Slurm: %+v, %v", final, err)
			}
		}()
		wg.Wait()
	})

	t.Run("cancel reaches Slurm", func(t *testing.T) {
		c, _ := td.user("canceller")
		sub := slowSubmission(t, c, 60)
		run := firstRun(t, c, sub)
		waitFor(t, 60*time.Second, func() bool { _, st := slurmJobOf(t, run.ID); return st == "RUNNING" })
		// kernelbox gpus shows where the run is out.
		waitFor(t, 10*time.Second, func() bool {
			st, err := td.admin.GPUs(ctx)
			if err != nil {
				return false
			}
			for _, s := range st.Slots {
				if strings.HasPrefix(s.Remote, "Slurm job ") && strings.Contains(s.Remote, "RUNNING on ") {
					return true
				}
			}
			return false
		})
		// The queue page says so too.
		b := newBrowser(t, td.server)
		if code, _, body := b.post("/login", url.Values{"token": {td.token}, "next": {"/queue"}}, nil); code != http.StatusOK {
			t.Fatalf("sign in: %d:\n%s", code, body)
		}
		_, _, page := b.get("/queue")
		mustContain(t, "queue page", page, "Runs go to a Slurm cluster", "(Slurm job ", "<code>slurm:cpu:")
		// While it is out, only its own job token reaches it.
		for _, token := range []string{"", "not-its-token", td.token} {
			forger, err := api.NewClient(td.server, token)
			if err != nil {
				t.Fatal(err)
			}
			if err := forger.NodeResult(ctx, run.ID, api.NodeResult{Error: "forged"}); api.ErrorCode(err) != api.CodeUnauthorized {
				t.Errorf("NodeResult for the running run with token %q = %v, want unauthorized", token, err)
			}
			if _, err := forger.NodeJob(ctx, run.ID); api.ErrorCode(err) != api.CodeUnauthorized {
				t.Errorf("NodeJob of the running run with token %q = %v, want unauthorized", token, err)
			}
		}
		if _, err := c.Cancel(ctx, sub); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		waitFor(t, 30*time.Second, func() bool { _, st := slurmJobOf(t, run.ID); return st == "CANCELLED" })
	})

	t.Run("a killed node's job is run again", func(t *testing.T) {
		c, _ := td.user("survivor")
		sub := slowSubmission(t, c, 20)
		run := firstRun(t, c, sub)
		var first string
		waitFor(t, 60*time.Second, func() bool { id, st := slurmJobOf(t, run.ID); first = id; return st == "RUNNING" })
		// The node dies: slurmd, the job's slurmstepd and the job itself.
		killNode(t, first)
		waitFor(t, 90*time.Second, func() bool {
			id, st := slurmJobOf(t, run.ID)
			return id != first && id != "" || st == "NODE_FAIL"
		})
		t.Logf("Slurm gave up job %s; the node comes back", first)
		if out, err := exec.Command(filepath.Join(testutil.RepoRoot(), ".ci", "slurm.sh"), "startd").CombinedOutput(); err != nil {
			t.Fatalf("restart slurmd: %v: %s", err, out)
		}
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		final, err := c.Wait(wctx, sub, nil)
		if err != nil || !final.Passed {
			t.Fatalf("after the node came back: %+v, %v", final, err)
		}
		if a := final.Runs[0].Attempts; a < 2 {
			t.Errorf("run attempts = %d, want 2 or more (the lost attempt and the one that completed)", a)
		}
		second, _ := slurmJobOf(t, run.ID)
		if second == first {
			t.Errorf("the run completed as Slurm job %s, the one whose node was killed", first)
		}
	})

	t.Run("doctor checks the pools against the cluster", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "coordinator.yaml")
		body := "executor: slurm\nslurm:\n  coordinator: " + td.server + "\n  pools:\n" +
			"    - {gres: fake, gpu_type: cpu, gpus: 2}\n    - {gres: h100, gpu_type: H100, gpus: 8}\n"
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _, code := runCLI(t, "doctor", "--config", cfg)
		if code == 0 || !strings.Contains(out, "✓ Slurm pool cpu") || !strings.Contains(out, "offers gpu:fake:2") ||
			!strings.Contains(out, "✗ Slurm pool H100") || !strings.Contains(out, "offers gpu:h100") {
			t.Errorf("doctor on the coordinator = exit %d:\n%s", code, out)
		}
		// On the node: the coordinator in reach, and the GRES slurmd reports.
		out, _, _ = runCLI(t, "doctor", "--coordinator", td.server)
		if !strings.Contains(out, "✓ coordinator") || !strings.Contains(out, "Type=fake Count=2") {
			t.Errorf("doctor on the node:\n%s", out)
		}
	})

	// The token check while a run is out is in "cancel reaches Slurm";
	// here, a made-up token for a run that has ended long since.
	t.Run("a made-up token is refused", func(t *testing.T) {
		c, err := api.NewClient(td.server, "not-a-job-token")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.NodeResult(ctx, 1, api.NodeResult{Error: "forged"}); api.ErrorCode(err) != api.CodeUnauthorized {
			t.Errorf("NodeResult with a bad token = %v, want unauthorized", err)
		}
		if _, err := c.NodeJob(ctx, 1); api.ErrorCode(err) != api.CodeUnauthorized {
			t.Errorf("NodeJob with a bad token = %v, want unauthorized", err)
		}
	})
}

// With slurm.shared_dir and no coordinator URL, the nodes never reach
// the coordinator's API: their runs and reports, progress included, go
// through the shared directory, whose attempt directories go when their
// attempts end (cancelled ones too).
func TestSlurm_SharedDir(t *testing.T) {
	shared := t.TempDir()
	td := startCoordinator(t, func(c *Config) { c.Slurm.Coordinator, c.Slurm.SharedDir = "", shared })
	td.loadQuick()
	ctx := t.Context()
	fast, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Glob(filepath.Join(shared, "kernelbox-*"))
	if err != nil || len(root) != 1 {
		t.Fatalf("the coordinator's part of the shared directory: %v, %v", root, err)
	}
	attempts := func() []string {
		entries, _ := os.ReadDir(root[0])
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}

	var wg sync.WaitGroup
	for i, mode := range []string{"test", "leaderboard"} {
		c, _ := td.user(fmt.Sprintf("shared%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			kinds := map[api.EventKind]int{}
			if passThrough(t, c, fast, mode, func(ev api.Event) { kinds[ev.Kind]++ }) != nil && mode == "test" &&
				(kinds[api.EventRunTest] == 0 || kinds[api.EventRunPhase] == 0) {
				t.Errorf("%s: events seen %v, want the node's test and phase events", mode, kinds)
			}
		}()
	}
	wg.Wait()
	if left := attempts(); len(left) != 0 {
		t.Errorf("attempt directories left after their runs: %v", left)
	}

	c, _ := td.user("shared-canceller")
	sub := slowSubmission(t, c, 60)
	run := firstRun(t, c, sub)
	waitFor(t, 60*time.Second, func() bool { _, st := slurmJobOf(t, run.ID); return st == "RUNNING" })
	if len(attempts()) != 1 {
		t.Errorf("attempt directories while one run is out: %v, want one", attempts())
	}
	if _, err := c.Cancel(ctx, sub); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	waitFor(t, 30*time.Second, func() bool { _, st := slurmJobOf(t, run.ID); return st == "CANCELLED" })
	waitFor(t, 30*time.Second, func() bool { return len(attempts()) == 0 })

	// doctor on a node checks the directory instead of the API.
	out, _, _ := runCLI(t, "doctor", "--shared-dir", shared)
	if !strings.Contains(out, "✓ shared directory") || strings.Contains(out, "coordinator") {
		t.Errorf("doctor --shared-dir on the node:\n%s", out)
	}
	out, _, code := runCLI(t, "doctor", "--shared-dir", filepath.Join(shared, "not-mounted"))
	if code == 0 || !strings.Contains(out, "✗ shared directory") {
		t.Errorf("doctor --shared-dir with no such directory = exit %d:\n%s", code, out)
	}
}

// BenchmarkSlurm_Overhead is what the slurm executor adds to a run: the
// quick problem's correct solution in test mode through a coordinator
// and the one-node Slurm, against the same through a daemon with the
// local executor, and through a coordinator whose nodes report in a shared
// directory, alternated in one run. Slurm's scheduling (a job starts
// 0.5-3 s after sbatch) and the node side's start are the difference.
func BenchmarkSlurm_Overhead(b *testing.B) {
	coord := startCoordinator(b)
	coord.loadQuick()
	local := startDaemon(b, b.TempDir(), func(c *Config) { c.CPUSlots = 1 })
	local.loadQuick()
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		b.Fatal(err)
	}
	shared := startCoordinator(b, func(c *Config) { c.Slurm.Coordinator, c.Slurm.SharedDir = "", b.TempDir() })
	shared.loadQuick()
	ctx := b.Context()
	one := func(td *testDaemon) time.Duration {
		begin := time.Now()
		sub, err := td.admin.Submit(ctx, api.SubmitRequest{Code: code, FileName: "double.py", Mode: "test"})
		if err != nil {
			b.Fatal(err)
		}
		if v, err := td.admin.Wait(ctx, sub.ID, nil); err != nil || !v.Passed {
			b.Fatalf("%+v, %v", v, err)
		}
		return time.Since(begin)
	}
	var viaLocal, viaSlurm, viaShared time.Duration
	for range b.N {
		viaLocal += one(local)
		viaSlurm += one(coord)
		viaShared += one(shared)
	}
	n := float64(b.N)
	b.ReportMetric(viaLocal.Seconds()/n, "local-s/op")
	b.ReportMetric(viaSlurm.Seconds()/n, "slurm-s/op")
	b.ReportMetric(viaShared.Seconds()/n, "shared-dir-s/op")
	b.ReportMetric(viaSlurm.Seconds()/viaLocal.Seconds(), "x-vs-local")
	b.ReportMetric(viaShared.Seconds()/viaSlurm.Seconds(), "shared-x-vs-api")
}
