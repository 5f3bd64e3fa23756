package appliance

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/appliance/api"
	"kernelbox/gpu/gputest"
	"kernelbox/internal/testutil"
	"kernelbox/problems"
)

// TestDaemon_MultiGPU: the bundled multi-GPU problems through the daemon
// on the CPU backend, with single-slot jobs queued alongside. Each run of
// them takes a gang of 4 CPU slots (the problems' largest world_size) and
// runs its cases at world_size 2 and 4, gloo ranks in one sandbox talking
// over its loopback: the templates pass (the all-reduce in leaderboard
// mode, with a score), the wrong solutions fail naming the rank, and a
// problem needing more slots than the box has is refused at submission.
func TestDaemon_MultiGPU(t *testing.T) {
	t.Parallel()
	// The bundled library has them.
	td := startDaemon(t, t.TempDir(), func(c *Config) { c.CPUSlots, c.Library = 4, true })
	lib := filepath.Join("..", "problems", "library")
	td.loadQuick()
	ctx := t.Context()
	alice, _ := td.user("alice")
	bob, _ := td.user("bob")
	read := func(path string) []byte {
		b, err := os.ReadFile(filepath.Join(lib, path))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	type want struct {
		passed bool
		reason string
	}
	cases := []struct {
		who   *api.Client
		req   api.SubmitRequest
		want  want
		multi bool
	}{
		{alice, api.SubmitRequest{Leaderboard: "allreduce", Mode: "leaderboard", Code: read("allreduce/templates/torch.py")}, want{true, ""}, true},
		{bob, api.SubmitRequest{Leaderboard: "quick", Mode: "test", Code: []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")}, want{true, ""}, false},
		{bob, api.SubmitRequest{Leaderboard: "allgather_gemm", Mode: "test", Code: read("allgather_gemm/templates/torch.py")}, want{true, ""}, true},
		{bob, api.SubmitRequest{Leaderboard: "quick", Mode: "benchmark", Code: []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")}, want{true, ""}, false},
		{alice, api.SubmitRequest{Leaderboard: "moe_dispatch", Mode: "test", Code: read("moe_dispatch/templates/torch.py")}, want{true, ""}, true},
		{bob, api.SubmitRequest{Leaderboard: "allreduce", Mode: "test", Code: read("allreduce/solutions/wrong/skips_own_share.py")}, want{false, "rank "}, true},
		{alice, api.SubmitRequest{Leaderboard: "moe_dispatch", Mode: "test", Code: read("moe_dispatch/solutions/wrong/unordered_blocks.py")}, want{false, "rank "}, true},
	}
	ids := make([]int64, len(cases))
	for i, c := range cases {
		sub, err := c.who.Submit(ctx, c.req)
		if err != nil {
			t.Fatalf("submit %d (%s): %v", i, c.req.Leaderboard, err)
		}
		ids[i] = sub.ID
	}
	for i, c := range cases {
		v, err := td.admin.Wait(ctx, ids[i], nil)
		if err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
		if v.Passed != c.want.passed || !strings.Contains(v.Reason, c.want.reason) {
			t.Errorf("%s %s: passed %v, reason %q; want passed %v with %q", c.req.Leaderboard, c.req.Mode, v.Passed, v.Reason, c.want.passed, c.want.reason)
		}
		for _, r := range v.Runs {
			slots := strings.Count(r.GPUID, "+") + 1
			if c.multi && slots != 4 || !c.multi && slots != 1 {
				t.Errorf("%s run %d ran on %q; want %s", c.req.Leaderboard, r.ID, r.GPUID, map[bool]string{true: "a gang of 4 slots", false: "one slot"}[c.multi])
			}
		}
	}
	if v, _ := td.admin.Wait(ctx, ids[0], nil); v == nil || v.Score == nil || len(v.Runs) != 2 {
		t.Errorf("allreduce leaderboard submission = %+v; want a score from both runs", v)
	}

	// A problem asking for 8 ranks on a box of 4 slots.
	big := allreduceCopy(t, "allreduce8")
	testutil.EditFile(t, filepath.Join(big, "task.yml"), "{n: 1048576, world_size: 4, seed: 93246}", "{n: 1048576, world_size: 8, seed: 93246}")
	if _, errOut, code := td.cli(td.token, "admin", "problems", "load", big); code != 0 {
		t.Fatalf("load allreduce8: exit %d: %s", code, errOut)
	}
	_, err := alice.Submit(ctx, api.SubmitRequest{Leaderboard: "allreduce8", Mode: "benchmark", Code: read("allreduce/templates/torch.py")})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeUnavailable || !strings.Contains(ae.Message, "needs 8 cpu at once") {
		t.Errorf("submit to allreduce8 = %v; want %s: needs 8 cpu at once", err, api.CodeUnavailable)
	}
}

// allreduceCopy is the bundled allreduce problem under another name, with
// the harness's files beside it (an uploaded problem has no ../harness).
func allreduceCopy(t *testing.T, name string) string {
	t.Helper()
	lib := filepath.Join("..", "problems", "library")
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(lib, "allreduce"))); err != nil {
		t.Fatal(err)
	}
	harness, err := filepath.Glob(filepath.Join(lib, "harness", "*.py"))
	if err != nil || len(harness) == 0 {
		t.Fatalf("the bundled harness: %v", err)
	}
	for _, f := range harness {
		f = filepath.Base(f)
		b, err := os.ReadFile(filepath.Join(lib, "harness", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
		testutil.EditFile(t, filepath.Join(dir, "task.yml"), "../harness/"+f, f)
	}
	return dir
}

// TestDaemon_FakeGPUGang: on two fake H200s joined by NVLink, `kernelbox
// gpus` shows the links, and a multi-GPU run takes both at once: one
// sandbox with both GPUs' device nodes and both UUIDs in
// CUDA_VISIBLE_DEVICES, each rank printing what it sees. (The ranks run on
// the CPU with gloo: the fake GPUs are nodes without a driver.)
func TestDaemon_FakeGPUGang(t *testing.T) {
	t.Parallel()
	td := startDaemonWith(t, t.TempDir(), func(c *Config) { c.CPUSlots, c.GPUs = 0, "auto" }, func(d *Daemon) {
		d.nvml = &gputest.NVML{Driver: "580.0", GPUs: []gputest.GPU{
			{Name: "NVIDIA H200", UUID: "GPU-aaaa", Minor: 0, PCI: "00000000:00:06.0", NUMA: -1,
				NVLink: []string{"00000000:00:07.0", "00000000:00:07.0"}},
			{Name: "NVIDIA H200", UUID: "GPU-bbbb", Minor: 1, PCI: "00000000:00:07.0", NUMA: -1,
				NVLink: []string{"00000000:00:06.0", "00000000:00:06.0"}},
		}}
		d.gpuRoot = filepath.Join("..", "gpu", "testdata", "nvidia")
	})
	ctx := t.Context()
	if out, _, code := td.cli(td.token, "gpus"); code != 0 || strings.Count(out, "2 to 1 GPUs") != 2 {
		t.Errorf("kernelbox gpus = exit %d:\n%s\nwant each GPU with 2 links to the other", code, out)
	}
	dir := allreduceCopy(t, "allreduce2")
	b, err := os.ReadFile(filepath.Join(dir, "task.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "task.yml"), []byte(strings.ReplaceAll(string(b), "world_size: 4", "world_size: 2")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := td.cli(td.token, "admin", "problems", "load", dir); code != 0 {
		t.Fatalf("load allreduce2: exit %d: %s", code, errOut)
	}
	tmpl, err := os.ReadFile(filepath.Join(dir, "templates", "torch.py"))
	if err != nil {
		t.Fatal(err)
	}
	// One write(2) per line: the two ranks share stdout, and a pipe keeps a
	// short write whole where print's pieces would interleave.
	probe := append([]byte(`import os
os.write(1, f"VISIBLE {os.environ.get('CUDA_VISIBLE_DEVICES')} NCCL_NVLS_ENABLE {os.environ.get('NCCL_NVLS_ENABLE')}\n".encode())
os.write(1, ("DEV " + " ".join(sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))) + "\n").encode())
`), tmpl...)
	sub, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "allreduce2", GPU: "H200", Mode: "test", Code: probe})
	if err != nil {
		t.Fatal(err)
	}
	v, err := td.admin.Wait(ctx, sub.ID, nil)
	if err != nil || !v.Passed {
		t.Fatalf("submission = %+v, %v; want passed", v, err)
	}
	if got := v.Runs[0].GPUID; got != "GPU-aaaa+GPU-bbbb" {
		t.Errorf("the run took %q; want the gang GPU-aaaa+GPU-bbbb", got)
	}
	var rep problems.Report
	if err := json.Unmarshal(v.Runs[0].Report, &rep); err != nil || len(rep.Phases) == 0 {
		t.Fatalf("report: %v", err)
	}
	stdout := rep.Phases[0].Stdout
	if strings.Count(stdout, "VISIBLE GPU-aaaa,GPU-bbbb NCCL_NVLS_ENABLE 0\n") != 2 || strings.Count(stdout, "DEV nvidia-uvm nvidia0 nvidia1 nvidiactl") != 2 {
		t.Errorf("the ranks printed %q; want both to see both GPUs, in one CUDA_VISIBLE_DEVICES, with NVLS off", stdout)
	}
}
