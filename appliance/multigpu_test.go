package appliance

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/internal/testutil"
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
		who   *Client
		req   SubmitRequest
		want  want
		multi bool
	}{
		{alice, SubmitRequest{Leaderboard: "allreduce", Mode: "leaderboard", Code: read("allreduce/templates/torch.py")}, want{true, ""}, true},
		{bob, SubmitRequest{Leaderboard: "quick", Mode: "test", Code: []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")}, want{true, ""}, false},
		{bob, SubmitRequest{Leaderboard: "allgather_gemm", Mode: "test", Code: read("allgather_gemm/templates/torch.py")}, want{true, ""}, true},
		{bob, SubmitRequest{Leaderboard: "quick", Mode: "benchmark", Code: []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")}, want{true, ""}, false},
		{alice, SubmitRequest{Leaderboard: "moe_dispatch", Mode: "test", Code: read("moe_dispatch/templates/torch.py")}, want{true, ""}, true},
		{bob, SubmitRequest{Leaderboard: "allreduce", Mode: "test", Code: read("allreduce/solutions/wrong/skips_own_share.py")}, want{false, "rank "}, true},
		{alice, SubmitRequest{Leaderboard: "moe_dispatch", Mode: "test", Code: read("moe_dispatch/solutions/wrong/unordered_blocks.py")}, want{false, "rank "}, true},
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
	big := filepath.Join(t.TempDir(), "allreduce8")
	if err := os.CopyFS(big, os.DirFS(filepath.Join(lib, "allreduce"))); err != nil {
		t.Fatal(err)
	}
	task := filepath.Join(big, "task.yml")
	for _, f := range []string{"eval.py", "kbutils.py"} {
		if err := os.WriteFile(filepath.Join(big, f), read(filepath.Join("harness", f)), 0o644); err != nil {
			t.Fatal(err)
		}
		testutil.EditFile(t, task, "../harness/"+f, f)
	}
	testutil.EditFile(t, task, "{n: 1048576, world_size: 4, seed: 93246}", "{n: 1048576, world_size: 8, seed: 93246}")
	if _, errOut, code := td.cli(td.token, "admin", "problems", "load", big); code != 0 {
		t.Fatalf("load allreduce8: exit %d: %s", code, errOut)
	}
	_, err := alice.Submit(ctx, SubmitRequest{Leaderboard: "allreduce8", Mode: "benchmark", Code: read("allreduce/templates/torch.py")})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeUnavailable || !strings.Contains(ae.Message, "needs 8 cpu at once") {
		t.Errorf("submit to allreduce8 = %v; want %s: needs 8 cpu at once", err, CodeUnavailable)
	}
}
