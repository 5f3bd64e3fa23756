package appliance

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/gpu/gputest"
	"kernelbox/internal/testutil"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

// testDaemon is a real daemon on a temporary data directory, a
// 127.0.0.1:0 listener, the real sandbox and the CPU backend.
type testDaemon struct {
	t      testing.TB
	d      *Daemon
	dir    string
	server string
	admin  *api.Client
	token  string // the admin's
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// requireRootSandbox skips unless this process can start sandboxes.
func requireRootSandbox(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon's tests run submissions in the real sandbox (CI runs them as root)")
	}
	if !sandbox.SeccompBuilt() {
		t.Skip("needs the seccomp build tag: run make test, or go test -tags seccomp")
	}
}

// testCgroupParent gives one daemon a cgroup parent of its own, so that
// its start-up sweep of orphan cgroups cannot touch another test's runs,
// and removes it afterwards.
func testCgroupParent(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "kernelbox-test-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { removeCgroup(name) }) // empty by now; a leftover run would keep it, and show
	return name
}

func startDaemon(t testing.TB, dir string, mutate func(*Config)) *testDaemon {
	t.Helper()
	return startDaemonWith(t, dir, mutate, nil)
}

// startDaemonWith is startDaemon with a hook that can replace the daemon's
// hardware (fake GPUs) or launcher before it starts.
func startDaemonWith(t testing.TB, dir string, mutate func(*Config), prepare func(*Daemon)) *testDaemon {
	t.Helper()
	requireRootSandbox(t)
	it := testutil.RequireTorch(t)
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.Listen = "127.0.0.1:0"
	cfg.CPUSlots = 2
	cfg.Library = false
	cfg.LeaseTTL = 3 * time.Second
	cfg.Grace = 5 * time.Second
	cfg.CgroupParent = testCgroupParent(t)
	cfg.Budget = BudgetConfig{Memory: 8 << 30, Pids: 8000}
	cfg.GPUs = "none"   // the tests of fake GPUs turn it on; the real ones stay out of the way
	cfg.Standby = false // TestDaemon_Standby turns it on: a standby is two more Python processes per GPU
	cfg.Canary = 0      // TestCanary_* turn it on: a canary borrows a slot the tests count on
	if mutate != nil {
		mutate(&cfg)
	}
	d := NewDaemon(cfg, testLogger(t))
	d.Python = it
	if prepare != nil {
		prepare(d)
	}
	if err := d.Start(t.Context()); err != nil {
		t.Fatalf("Daemon.Start: %v", err)
	}
	td := &testDaemon{t: t, d: d, dir: dir, server: "http://" + d.Addr()}
	t.Cleanup(func() { td.stop() })
	token, err := os.ReadFile(AdminTokenFile(dir))
	if err != nil {
		t.Fatalf("admin token: %v", err)
	}
	td.token = strings.TrimSpace(string(token))
	if td.admin, err = api.NewClient(td.server, td.token); err != nil {
		t.Fatal(err)
	}
	return td
}

func (td *testDaemon) stop() {
	if td.d == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := td.d.Stop(ctx); err != nil {
		td.t.Errorf("Daemon.Stop: %v", err)
	}
	td.d = nil
}

// cli runs a client command against the daemon.
func (td *testDaemon) cli(token string, args ...string) (string, string, int) {
	td.t.Helper()
	all := append(append([]string{}, args...), "--server", td.server, "--token", token,
		"--client-config", filepath.Join(td.dir, "client.json"))
	return runCLI(td.t, all...)
}

func (td *testDaemon) loadQuick() {
	td.t.Helper()
	if out, errOut, code := td.cli(td.token, "admin", "problems", "load", filepath.Join("testdata", "quick")); code != 0 {
		td.t.Fatalf("admin problems load = exit %d\n%s%s", code, out, errOut)
	}
}

// loadQuickOn loads a copy of the quick problem, named quickgpu, that ranks
// on the given GPU types ("[H200, cpu]").
func (td *testDaemon) loadQuickOn(gpus string) {
	td.t.Helper()
	td.loadQuickAs("quickgpu", "gpus: [cpu]", "gpus: "+gpus)
}

// loadQuickAs loads a copy of the quick problem under another name, its
// task.yml edited (old replaced by new).
func (td *testDaemon) loadQuickAs(name, old, new string) {
	td.t.Helper()
	prob := filepath.Join(td.t.TempDir(), name)
	if err := os.CopyFS(prob, os.DirFS(filepath.Join("testdata", "quick"))); err != nil {
		td.t.Fatal(err)
	}
	testutil.EditFile(td.t, filepath.Join(prob, "task.yml"), old, new)
	if _, errOut, code := td.cli(td.token, "admin", "problems", "load", prob); code != 0 {
		td.t.Fatalf("load %s: exit %d: %s", name, code, errOut)
	}
}

// waitSlotIdle waits until slot i has finished its job and the health
// check after it.
func (td *testDaemon) waitSlotIdle(i int) {
	td.t.Helper()
	waitFor(td.t, 10*time.Second, func() bool {
		st, err := td.admin.GPUs(td.t.Context())
		return err == nil && st.Slots[i].State == "idle"
	})
}

// waitRunning waits until the submission's first run has started.
func waitRunning(t *testing.T, c *api.Client, id int64) {
	t.Helper()
	waitFor(t, 30*time.Second, func() bool {
		s, err := c.Submission(t.Context(), id, false)
		return err == nil && s.Status == api.StatusRunning
	})
}

func (td *testDaemon) user(name string) (*api.Client, string) {
	td.t.Helper()
	cr, err := td.admin.AddUser(td.t.Context(), name, api.RoleContestant)
	if err != nil {
		td.t.Fatalf("AddUser(%s): %v", name, err)
	}
	c, err := api.NewClient(td.server, cr.Token)
	if err != nil {
		td.t.Fatal(err)
	}
	return c, cr.Token
}

func quickSolution(name string) string { return filepath.Join("testdata", "quick", "solutions", name) }

func TestDaemon_SubmitThroughCLI(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	out, errOut, code := td.cli(td.token, "admin", "users", "add", "ann")
	if code != 0 {
		t.Fatalf("admin users add = exit %d: %s", code, errOut)
	}
	ann := strings.TrimSpace(out)

	// Test mode, correct: the directives name the leaderboard and GPU.
	out, errOut, code = td.cli(ann, "submit", quickSolution("correct/double.py"), "--json")
	if code != api.ExitOK {
		t.Fatalf("submit correct = exit %d\n%s%s", code, out, errOut)
	}
	var res api.SubmitResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("submit --json printed %q: %v", out, err)
	}
	if !res.Passed || res.Mode != "test" || res.Status != api.StatusDone || len(res.Tests) != 2 || res.ID == 0 {
		t.Errorf("submit correct --json = %+v, want passed, mode test, done, 2 tests", res)
	}

	// Each test was reported live, before its phase ended.
	annEv, _ := api.NewClient(td.server, ann)
	page, err := annEv.Events(t.Context(), res.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range page.Events {
		kinds = append(kinds, string(ev.Kind))
	}
	if got := strings.Join(kinds, " "); !strings.Contains(got, "run.started run.test run.test run.phase run.finished") {
		t.Errorf("events = %s; want the two tests reported between run.started and run.phase", got)
	}

	// Wrong answer: exit 1, the failing test named.
	out, _, code = td.cli(ann, "submit", quickSolution("wrong/zero_last.py"))
	if code != api.ExitFailed || !strings.Contains(out, "FAILED") || !strings.Contains(out, "wrong result") || !strings.Contains(out, "✗ test 0 n: 3") {
		t.Errorf("submit wrong = exit %d\n%s\nwant exit 1 and the failing test", code, out)
	}

	// Leaderboard mode: scored and ranked after the secret twin passes.
	out, errOut, code = td.cli(ann, "submit", quickSolution("correct/double.py"), "--leaderboard", "quick", "--gpu", "cpu", "--mode", "leaderboard", "--json")
	if code != api.ExitOK {
		t.Fatalf("submit leaderboard = exit %d\n%s%s", code, out, errOut)
	}
	res = api.SubmitResult{}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Score == nil || *res.Score <= 0 || res.Rank != 1 || len(res.Benchmarks) != 2 || res.Secret == nil || !res.Secret.Passed {
		t.Errorf("submit --mode leaderboard = %+v, want a score, rank 1, 2 benchmarks and a passed secret run", res)
	}
	if res.Secret != nil && len(res.Secret.Report) != 0 {
		t.Errorf("the contestant sees the secret run's report: %s", res.Secret.Report)
	}
	ranked := res.ID

	// A submission that fails only on the secret seed is not ranked.
	out, _, code = td.cli(ann, "submit", filepath.Join("testdata", "submissions", "secret_fail.py"), "--mode", "leaderboard", "--json")
	res = api.SubmitResult{}
	_ = json.Unmarshal([]byte(out), &res)
	if code != api.ExitFailed || res.Passed || res.Score != nil || !strings.Contains(res.Reason, "secret") {
		t.Errorf("submit secret_fail = exit %d, %+v; want exit 1, not passed, no score, a secret-run reason", code, res)
	}
	// Nothing the contestant can read names the secret inputs.
	annC, _ := api.NewClient(td.server, ann)
	page, err = annC.Events(t.Context(), res.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range page.Events {
		var d struct {
			Secret bool `json:"secret"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		if d.Secret && strings.Contains(string(ev.Data), "wrong result") {
			t.Errorf("event %s of the secret run shows its failure: %s", ev.Kind, ev.Data)
		}
	}
	if v, err := annC.Submission(t.Context(), res.ID, false); err == nil {
		for _, r := range v.Runs {
			if r.Secret && (strings.Contains(r.Reason, "wrong result") || r.Report != nil) {
				t.Errorf("the secret run as the contestant sees it: %q, %s", r.Reason, r.Report)
			}
		}
	}

	out, _, code = td.cli(ann, "leaderboard", "quick", "--gpu", "cpu", "--json")
	var rows []api.RankRow
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
		t.Fatalf("leaderboard --json = exit %d, %q: %v", code, out, err)
	}
	if len(rows) != 1 || rows[0].Rank != 1 || rows[0].User != "ann" || rows[0].Submission != ranked {
		t.Errorf("leaderboard quick = %+v, want ann first with submission %d", rows, ranked)
	}

	// An organiser marks the ranked submission hacked: it leaves the ranking.
	if _, errOut, code := td.cli(td.token, "admin", "hacked", strconv.FormatInt(ranked, 10)); code != 0 {
		t.Fatalf("admin hacked = exit %d: %s", code, errOut)
	}
	if out, _, _ = td.cli(ann, "leaderboard", "quick", "--gpu", "cpu", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("leaderboard after marking the only entry hacked = %s, want []", out)
	}
	if _, _, code := td.cli(td.token, "admin", "hacked", strconv.FormatInt(ranked, 10), "--clear"); code != 0 {
		t.Errorf("admin hacked --clear = exit %d", code)
	}

	// --no-wait prints the id at once; show follows it to its result.
	out, _, code = td.cli(ann, "submit", quickSolution("correct/double.py"), "--no-wait", "--json")
	var queued struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &queued); code != 0 || err != nil || queued.ID == 0 {
		t.Fatalf("submit --no-wait --json = exit %d, %q", code, out)
	}
	annClient, _ := api.NewClient(td.server, ann)
	if _, err := annClient.Wait(t.Context(), queued.ID, nil); err != nil {
		t.Fatal(err)
	}
	out, _, code = td.cli(ann, "submissions", "show", strconv.FormatInt(queued.ID, 10), "--json")
	var shown struct {
		Status string            `json:"status"`
		Result *api.SubmitResult `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil || shown.Status != api.StatusDone || shown.Result == nil || !shown.Result.Passed {
		t.Errorf("submissions show --json = exit %d, %q; want done with a passed result", code, out)
	}
	out, _, code = td.cli(ann, "submissions", "list", "--json")
	var list []store.Submission
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) != 5 {
		t.Errorf("submissions list --json = exit %d, %d submissions (%v); want 5", code, len(list), err)
	}
	out, _, code = td.cli(ann, "problems", "template", "quick", "Python")
	if want, _ := os.ReadFile(quickSolution("correct/double.py")); code != 0 || out != string(want) {
		t.Errorf("problems template quick Python = exit %d, %q; want the template file", code, out)
	}
	if out, _, code = td.cli(ann, "problems", "show", "quick"); code != 0 || !strings.Contains(out, "Double every element") {
		t.Errorf("problems show quick = exit %d, %q", code, out)
	}
	if out, _, code = td.cli(ann, "problems", "list"); code != 0 || !strings.HasPrefix(out, "quick") {
		t.Errorf("problems list (with a server) = exit %d, %q; want the server's problems", code, out)
	}
	// Deleting a submission removes it for good.
	if _, errOut, code := td.cli(td.token, "admin", "delete", strconv.FormatInt(queued.ID, 10)); code != 0 {
		t.Errorf("admin delete = exit %d: %s", code, errOut)
	}
	if _, errOut, code := td.cli(ann, "submissions", "show", strconv.FormatInt(queued.ID, 10)); code != api.ExitUsage || !strings.Contains(errOut, "no submission") {
		t.Errorf("show a deleted submission = exit %d, %q; want exit 2, no submission", code, errOut)
	}
	out, _, code = td.cli(ann, "leaderboards", "--json")
	var lbs []api.LeaderboardInfo
	if err := json.Unmarshal([]byte(out), &lbs); code != 0 || err != nil || len(lbs) != 1 || lbs[0].State != "active" || lbs[0].GPUs[0] != "cpu" {
		t.Errorf("leaderboards --json = exit %d, %q", code, out)
	}
}

func TestDaemon_Refusals(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), func(c *Config) { c.MaxUploadBytes = 4096 })
	td.loadQuick()
	_, ann := td.user("ann")
	tmp := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	correct, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	closed := api.VisibilityClosed
	if _, err := td.admin.ChangeLeaderboard(ctx, "quick", api.LeaderboardChange{RateLimits: map[string]int{api.CategoryRanked: 1}}); err != nil {
		t.Fatal(err)
	}

	check := func(name string, wantCode int, wantText string, token string, args ...string) {
		t.Helper()
		out, errOut, code := td.cli(token, args...)
		if code != wantCode || !strings.Contains(errOut, wantText) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q (stdout %q)", name, code, errOut, wantCode, wantText, out)
		}
	}
	check("bad token", api.ExitUnauthorized, "not valid", "kb_nope", "submit", quickSolution("correct/double.py"))
	check("oversized", api.ExitRefused, "limit", ann, "submit", write("big.py", bytes.Repeat([]byte("#"), 5000)))
	check("not UTF-8", api.ExitUsage, "not UTF-8", ann, "submit", write("bin.py", []byte("def f():\n    return '\xff\xfe'\n")))
	check("malformed directive", api.ExitUsage, "line 1", ann, "submit", write("dir.py", append([]byte("#!POPCORN leaderboard\n"), correct...)))
	check("directive and flag disagree", api.ExitUsage, "#!POPCORN leaderboard is quick but the submission is for nope", ann, "submit", quickSolution("correct/double.py"), "--leaderboard", "nope")
	plain := write("plain.py", []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n"))
	check("no leaderboard", api.ExitUsage, "no leaderboard: pass --leaderboard", ann, "submit", plain)
	check("unknown leaderboard", api.ExitUsage, "no leaderboard nope", ann, "submit", plain, "--leaderboard", "nope")
	check("wrong GPU", api.ExitUsage, "does not rank on H200", ann, "submit", quickSolution("correct/double.py"), "--gpu", "H200")
	check("wrong language", api.ExitUsage, "takes a .py file", ann, "submit", write("k.cu", []byte("//!POPCORN leaderboard quick\n")))

	// Rate limit: one ranked submission an hour.
	if _, _, code := td.cli(ann, "submit", quickSolution("correct/double.py"), "--mode", "benchmark", "--no-wait"); code != 0 {
		t.Fatalf("first ranked submission refused: exit %d", code)
	}
	check("rate limit", api.ExitRefused, "rate limit", ann, "submit", quickSolution("correct/double.py"), "--mode", "benchmark")
	// Test mode has its own budget.
	if _, errOut, code := td.cli(ann, "submit", quickSolution("correct/double.py"), "--no-wait"); code != 0 {
		t.Errorf("test-mode submission after the ranked limit: exit %d: %s", code, errOut)
	}

	// Closed leaderboard: refused without an invite, taken after joining.
	if _, err := td.admin.ChangeLeaderboard(ctx, "quick", api.LeaderboardChange{Visibility: &closed}); err != nil {
		t.Fatal(err)
	}
	check("closed leaderboard", api.ExitRefused, "closed", ann, "submit", quickSolution("correct/double.py"))
	// ... and shows a non-member nothing: not listed, no info, ranking or
	// template; a member sees all of them (below).
	annC, err := api.NewClient(td.server, ann)
	if err != nil {
		t.Fatal(err)
	}
	sees := func() (listed bool, errs []error) {
		lbs, err := annC.Leaderboards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, lb := range lbs {
			listed = listed || lb.Name == "quick"
		}
		_, err = annC.Leaderboard(ctx, "quick")
		errs = append(errs, err)
		_, err = annC.Ranking(ctx, "quick", "")
		errs = append(errs, err)
		errs = append(errs, annC.Template(ctx, "quick", "Python", io.Discard))
		return listed, errs
	}
	listed, errs := sees()
	if listed {
		t.Error("a closed leaderboard is listed to a non-member")
	}
	for i, err := range errs {
		if api.ErrorCode(err) != api.CodeForbidden {
			t.Errorf("a non-member's read %d of a closed leaderboard (info, ranking, template) = %v, want forbidden", i, err)
		}
	}
	inv, err := td.admin.CreateInvite(ctx, api.Invite{Leaderboards: []string{"quick"}, Uses: 2})
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := td.cli(ann, "join", inv.Invite); code != 0 || !strings.Contains(out, "quick") {
		t.Fatalf("join = exit %d: %s%s", code, out, errOut)
	}
	if _, errOut, code := td.cli(ann, "submit", quickSolution("correct/double.py"), "--no-wait"); code != 0 {
		t.Errorf("submission after joining the closed leaderboard: exit %d: %s", code, errOut)
	}
	if listed, errs := sees(); !listed || errors.Join(errs...) != nil {
		t.Errorf("a member of the closed leaderboard: listed %v, reads %v; want all of it", listed, errs)
	}
	// register with the same invite makes a member at once.
	out, errOut, code := runCLI(t, "register", "--server", td.server, "--invite", inv.Invite, "--name", "bea",
		"--client-config", filepath.Join(tmp, "bea.json"))
	if code != 0 {
		t.Fatalf("register = exit %d: %s%s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "submit", quickSolution("correct/double.py"), "--no-wait", "--client-config", filepath.Join(tmp, "bea.json")); code != 0 {
		t.Errorf("submission by a registered invitee: exit %d: %s", code, errOut)
	}
	// One contestant cannot see or cancel another's submission.
	annSubs, err := api.NewClient(td.server, ann)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := annSubs.Submissions(ctx, "", false, 10)
	if err != nil || len(mine) == 0 {
		t.Fatalf("ann's submissions: %v, %v", mine, err)
	}
	other := strconv.FormatInt(mine[0].ID, 10)
	beaCfg := filepath.Join(tmp, "bea.json")
	for _, args := range [][]string{{"submissions", "show", other}, {"submissions", "cancel", other}, {"submissions", "delete", other}} {
		if _, errOut, code := runCLI(t, append(args, "--client-config", beaCfg)...); code != api.ExitUsage || !strings.Contains(errOut, "no submission") {
			t.Errorf("bea: %v = exit %d, %q; want exit 2, no submission", args, code, errOut)
		}
	}
	if out, _, _ := runCLI(t, "submissions", "list", "--all", "--json", "--client-config", beaCfg); strings.Contains(out, `"ann"`) {
		t.Errorf("bea's submissions list --all shows ann's: %s", out)
	}
	_, errOut, code = runCLI(t, "register", "--server", td.server, "--invite", inv.Invite, "--name", "cid", "--client-config", filepath.Join(tmp, "cid.json"))
	if code != api.ExitRefused || !strings.Contains(errOut, "used up") {
		t.Errorf("register with a spent invite = exit %d, %q; want %d and 'used up'", code, errOut, api.ExitRefused)
	}
	// Invites are listed by id, never by code, and a revoked one admits nobody.
	if out, errOut, code := td.cli(td.token, "admin", "invites", "list"); code != 0 || !strings.Contains(out, inv.ID) || strings.Contains(out, inv.Invite) {
		t.Errorf("admin invites list = exit %d, %q %s; want %s listed, its code not", code, out, errOut, inv.ID)
	}
	spare, err := td.admin.CreateInvite(ctx, api.Invite{Uses: 5})
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := td.cli(td.token, "admin", "invites", "revoke", spare.ID); code != 0 || !strings.Contains(out, "revoked invite "+spare.ID) {
		t.Errorf("admin invites revoke = exit %d, %q %s", code, out, errOut)
	}
	_, errOut, code = runCLI(t, "register", "--server", td.server, "--invite", spare.Invite, "--name", "dee", "--client-config", filepath.Join(tmp, "dee.json"))
	if code == 0 || !strings.Contains(errOut, "not valid") {
		t.Errorf("register with a revoked invite = exit %d, %q; want it refused", code, errOut)
	}

	// Deadline passed.
	past := time.Now().Add(-time.Minute)
	if _, err := td.admin.ChangeLeaderboard(ctx, "quick", api.LeaderboardChange{Deadline: &past}); err != nil {
		t.Fatal(err)
	}
	check("deadline", api.ExitRefused, "deadline", ann, "submit", quickSolution("correct/double.py"))

	// Banned.
	if _, err := td.admin.Ban(ctx, "ann", true); err != nil {
		t.Fatal(err)
	}
	check("banned", api.ExitRefused, "banned", ann, "submit", quickSolution("correct/double.py"))
	// A contestant is not an admin.
	check("not staff", api.ExitRefused, "needs an organiser", ann, "admin", "users", "add", "eve")
	// Nothing refused was stored.
	subs, err := td.admin.Submissions(ctx, "", true, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 4 {
		t.Errorf("stored submissions = %d, want the 4 accepted ones", len(subs))
	}
}

func TestDaemon_CancelRunning(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	ann, _ := td.user("ann")
	ctx := t.Context()
	code, err := os.ReadFile(filepath.Join("testdata", "submissions", "slow.py"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := ann.Submit(ctx, api.SubmitRequest{Code: code, FileName: "slow.py", Mode: "test"})
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ann, sub.ID)
	got, err := ann.Cancel(ctx, sub.ID)
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if got.Status != api.StatusCancelled {
		t.Errorf("Cancel = status %s, want cancelled", got.Status)
	}
	if _, err := ann.Cancel(ctx, sub.ID); api.ErrorCode(err) != api.CodeConflict {
		t.Errorf("Cancel again = %v, want a conflict", err)
	}
	// The slot is free again soon: the sandbox was stopped, not waited for.
	start := time.Now()
	fast, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	next, err := ann.Submit(ctx, api.SubmitRequest{Code: fast, Mode: "test"})
	if err != nil {
		t.Fatal(err)
	}
	final, err := ann.Wait(ctx, next.ID, nil)
	if err != nil || !final.Passed {
		t.Fatalf("submission after a cancel: %+v, %v", final, err)
	}
	t.Logf("next submission done %v after the cancel", time.Since(start))
}

// waitFor polls cond until it holds or the limit passes.
func waitFor(t testing.TB, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", limit)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestDaemon_LoadProblemSets(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), func(c *Config) { c.MaxProblemBytes = 4 << 20 })
	ctx := t.Context()
	// A competition file that reaches into sibling directories (../harness).
	out, errOut, code := td.cli(td.token, "admin", "problems", "load", lib(problems.LibraryCompetition), "--json")
	if code != 0 {
		t.Fatalf("admin problems load kernelbox.yaml = exit %d: %s", code, errOut)
	}
	var loaded []api.LoadedProblem
	if err := json.Unmarshal([]byte(out), &loaded); err != nil || len(loaded) != 15 || !loaded[0].Created {
		t.Fatalf("loaded = %v, %v; want 15 new leaderboards", loaded, err)
	}
	before, err := td.d.store.Leaderboard(ctx, "vectoradd")
	if err != nil {
		t.Fatal(err)
	}
	// Loading again is refused name by name, and changes nothing; so does
	// a dry run of --replace, which says what it would do.
	out, errOut, code = td.cli(td.token, "admin", "problems", "load", lib(problems.LibraryCompetition))
	if code != api.ExitRefused || !strings.Contains(out, "refused vectoradd: leaderboard vectoradd exists (from an uploaded problem set): load with --replace") ||
		!strings.Contains(errOut, "15 of 15 problems not loaded") {
		t.Fatalf("second load = exit %d:\n%s%s\nwant exit %d and every name refused", code, out, errOut, api.ExitRefused)
	}
	out, errOut, code = td.cli(td.token, "admin", "problems", "load", lib(problems.LibraryCompetition), "--replace", "--dry-run")
	if code != 0 || !strings.Contains(out, "would be replaced vectoradd (gpus") {
		t.Fatalf("dry run = exit %d:\n%s%s", code, out, errOut)
	}
	if same, err := td.d.store.Leaderboard(ctx, "vectoradd"); err != nil || same.ProblemDir != before.ProblemDir {
		t.Fatalf("after a refused load and a dry run: %+v, %v; want %s unchanged", same, err, before.ProblemDir)
	}
	uploads, err := os.ReadDir(filepath.Join(td.dir, "problems", "uploads"))
	if err != nil || len(uploads) != 1 {
		t.Errorf("uploads kept: %v, %v; want only the first set (the others changed nothing)", uploads, err)
	}
	// --replace replaces the problems and keeps the secret seeds.
	if _, errOut, code := td.cli(td.token, "admin", "problems", "load", lib(problems.LibraryCompetition), "--replace"); code != 0 {
		t.Fatalf("load --replace = exit %d: %s", code, errOut)
	}
	after, err := td.d.store.Leaderboard(ctx, "vectoradd")
	if err != nil {
		t.Fatal(err)
	}
	if after.SecretSeed != before.SecretSeed || after.ProblemDir == before.ProblemDir {
		t.Errorf("reload: seed %d→%d, dir %s→%s; want the same seed and the new directory", before.SecretSeed, after.SecretSeed, before.ProblemDir, after.ProblemDir)
	}

	// A problem whose file comes from outside the uploaded set is refused.
	evil := t.TempDir()
	task := "files:\n  - {name: submission.py, source: \"@SUBMISSION@\"}\n  - {name: eval.py, source: eval.py}\n" +
		"  - {name: stolen.txt, source: ../../../../../../../../etc/hostname}\nlang: py\nconfig: {main: eval.py}\n" +
		"tests:\n  - {n: 1, seed: 1}\nbenchmarks:\n  - {n: 1, seed: 1}\n"
	for name, body := range map[string]string{"task.yml": task, "eval.py": "print(1)\n"} {
		if err := os.WriteFile(filepath.Join(evil, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat("/etc/hostname"); err == nil {
		_, errOut, code = td.cli(td.token, "admin", "problems", "load", evil)
		if code != api.ExitUsage || !strings.Contains(errOut, "outside the problem set") {
			t.Errorf("load of a problem reading /etc/hostname = exit %d, %q; want exit 2, outside the problem set", code, errOut)
		}
	}
	// A competition loads its good problems and names the bad ones (a
	// task.yml that does not parse, a file from outside the set), with
	// paths inside the set, never the server's.
	set := t.TempDir()
	if err := os.CopyFS(filepath.Join(set, "good"), os.DirFS(filepath.Join("testdata", "quick"))); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(set, "outside"), os.DirFS(evil)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(set, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"broken/task.yml": "files: [\n",
		"comp.yaml":       "name: mixed\nproblems:\n  - {directory: good, name: mixed-good}\n  - {directory: broken}\n  - {directory: outside}\n",
	} {
		if err := os.WriteFile(filepath.Join(set, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code = td.cli(td.token, "admin", "problems", "load", filepath.Join(set, "comp.yaml"))
	for _, want := range []string{"created mixed-good", "invalid broken: comp.yaml:4: problems[1]: broken/task.yml: not valid YAML", "invalid outside:"} {
		if !strings.Contains(out, want) {
			t.Errorf("partial load output lacks %q:\n%s", want, out)
		}
	}
	if code != api.ExitUsage || !strings.Contains(errOut, "2 of 3 problems not loaded") || strings.Contains(out+errOut, td.dir) {
		t.Errorf("partial load = exit %d, %q; want exit 2, 2 of 3 not loaded, and no server path", code, errOut)
	}
	if _, err := td.d.store.Leaderboard(ctx, "mixed-good"); err != nil {
		t.Errorf("the good problem of a partial set: %v", err)
	}
	// Archives: a link, a path climbing out, garbage, too large.
	for name, archive := range map[string][]byte{
		"symlink":  tarGz(t, tarEntry{name: "task.yml", link: "/etc/passwd"}),
		"climbing": tarGz(t, tarEntry{name: "../../x/task.yml", body: "x"}),
		"garbage":  []byte("not a tarball"),
	} {
		if _, err := td.admin.LoadProblems(ctx, bytes.NewReader(archive), api.ProblemLoad{Name: "evil"}); api.ErrorCode(err) != api.CodeInvalid {
			t.Errorf("LoadProblems(%s) = %v, want invalid", name, err)
		}
	}
	noise := make([]byte, 5<<20)
	_, _ = rand.Read(noise) // incompressible: the archive stays over the cap
	big := tarGz(t, tarEntry{name: "task.yml", body: string(noise)})
	if _, err := td.admin.LoadProblems(ctx, bytes.NewReader(big), api.ProblemLoad{Name: "big"}); api.ErrorCode(err) != api.CodeTooLarge {
		t.Errorf("LoadProblems(5 MiB over a 4 MiB cap) = %v, want too_large", err)
	}
	if _, err := td.d.store.Leaderboard(ctx, "evil"); api.ErrorCode(err) != api.CodeNotFound {
		t.Errorf("a refused set left a leaderboard: %v", err)
	}
	uploads, _ = os.ReadDir(filepath.Join(td.dir, "problems", "uploads"))
	if len(uploads) != 3 {
		t.Errorf("%d directories under problems/uploads, want the 3 sets that loaded something (the others removed)", len(uploads))
	}
}

type tarEntry struct{ name, body, link string }

func tarGz(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.link != "" {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestDaemon_SocketAndQueue(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), func(c *Config) { c.CPUSlots = 1 })
	td.loadQuick()
	// Local administration over the unix socket, with the same tokens.
	sock := "unix:" + filepath.Join(td.dir, "kernelbox.sock")
	out, errOut, code := runCLI(t, "admin", "users", "add", "ann", "--server", sock, "--token", td.token)
	if code != 0 {
		t.Fatalf("admin users add over the socket = exit %d: %s", code, errOut)
	}
	annToken := strings.TrimSpace(out)
	ann, err := api.NewClient(td.server, annToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, code := runCLI(t, "admin", "users", "list", "--server", sock); code != api.ExitUnauthorized {
		t.Errorf("the socket without a token = exit %d, want %d", code, api.ExitUnauthorized)
	}
	ctx := t.Context()
	slow, _ := os.ReadFile(filepath.Join("testdata", "submissions", "slow.py"))
	fast, _ := os.ReadFile(quickSolution("correct/double.py"))
	first, err := ann.Submit(ctx, api.SubmitRequest{Code: slow, Mode: "test"})
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ann, first.ID)
	var later []int64
	for range 2 {
		s, err := ann.Submit(ctx, api.SubmitRequest{Code: fast, Mode: "benchmark"})
		if err != nil {
			t.Fatal(err)
		}
		later = append(later, s.ID)
	}
	q, err := ann.Queue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[int64]api.MyJob{}
	for _, j := range q.Mine {
		pos[j.Submission] = j
	}
	if pos[first.ID].State != "running" || pos[later[0]].Position != 0 || pos[later[1]].Position != 1 || pos[later[1]].State != "queued" {
		t.Errorf("Queue().Mine = %+v; want the slow one running, then positions 0 and 1", q.Mine)
	}
	if len(q.GPUs) != 1 || q.GPUs[0].GPUType != "cpu" || q.GPUs[0].Slots != 1 || q.GPUs[0].Queued != 2 || q.GPUs[0].Running != 1 {
		t.Errorf("Queue().GPUs = %+v; want cpu with 1 slot, 1 running, 2 queued", q.GPUs)
	}
	// The CLI shows where a waiting submission stands (test mode goes
	// before the two timed jobs, behind the running slow one).
	if out, errOut, code := td.cli(annToken, "submit", quickSolution("correct/double.py")); code != 0 || !strings.Contains(out, "queue position 0") {
		t.Errorf("submit while the slot is busy = exit %d:\n%s%s\nwant a queue position", code, out, errOut)
	}
	h, err := td.admin.Health(ctx)
	if err != nil || h.Status != "ok" || h.GPUs["cpu"] != 1 {
		t.Errorf("Health() = %+v, %v", h, err)
	}
}

// TestDaemon_FakeGPUs gives the daemon two fake H200s (a fake NVML over a
// /dev and /proc tree in testdata): each becomes a slot of type H200, and a
// run on one sees that GPU's device node, never the other's, with its
// UUID in CUDA_VISIBLE_DEVICES.
func TestDaemon_FakeGPUs(t *testing.T) {
	t.Parallel()
	td := startDaemonWith(t, t.TempDir(), func(c *Config) { c.CPUSlots, c.GPUs = 1, "auto" }, func(d *Daemon) {
		d.nvml = &gputest.NVML{Driver: "580.0", GPUs: []gputest.GPU{
			{Name: "NVIDIA H200", UUID: "GPU-aaaa", Minor: 0, PCI: "00000000:00:06.0", NUMA: -1},
			{Name: "NVIDIA H200", UUID: "GPU-bbbb", Minor: 1, PCI: "00000000:00:07.0", NUMA: -1},
		}}
		d.gpuRoot = filepath.Join("..", "gpu", "testdata", "nvidia")
	})
	ctx := t.Context()

	h, err := td.admin.Health(ctx)
	if err != nil || h.GPUs["H200"] != 2 || h.GPUs["cpu"] != 1 {
		t.Fatalf("Health() = %+v, %v; want 2 H200 slots and 1 cpu slot", h, err)
	}
	out, _, code := td.cli(td.token, "gpus")
	if code != 0 || !strings.Contains(out, "GPU-aaaa") || !strings.Contains(out, "0000:00:07.0") || !strings.Contains(out, "nvidia driver 580.0") {
		t.Errorf("kernelbox gpus = exit %d:\n%s", code, out)
	}

	// The quick problem, offered on H200 as well.
	td.loadQuickOn("[H200, cpu]")
	probe := []byte(`import os
print("VISIBLE", os.environ.get("CUDA_VISIBLE_DEVICES"))
print("DEV", " ".join(sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))))
def custom_kernel(xs):
    return [2 * x for x in xs]
`)
	// Two at once, each a second long, so both slots take one.
	probe = append([]byte("SLEEP = 1\n"), probe...)
	var ids []int64
	for range 2 {
		sub, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", GPU: "H200", Mode: "test", Code: probe})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sub.ID)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		v, err := td.admin.Wait(ctx, id, nil)
		if err != nil || !v.Passed {
			t.Fatalf("submission on H200: %+v, %v", v, err)
		}
		var rep problems.Report
		if err := json.Unmarshal(v.Runs[0].Report, &rep); err != nil || len(rep.Phases) == 0 {
			t.Fatalf("report: %v", err)
		}
		stdout := rep.Phases[0].Stdout
		slot := v.Runs[0].GPUID
		seen[slot] = true
		own, other := "nvidia0", "nvidia1"
		if slot == "GPU-bbbb" {
			own, other = other, own
		}
		if !strings.Contains(stdout, "VISIBLE "+slot+"\n") || !strings.Contains(stdout, own) || strings.Contains(stdout, other) ||
			!strings.Contains(stdout, "nvidiactl") || !strings.Contains(stdout, "nvidia-uvm") {
			t.Errorf("run on %s printed %q; want its UUID, %s, nvidiactl and nvidia-uvm, and no %s", slot, stdout, own, other)
		}
	}
	if len(seen) != 2 {
		t.Errorf("runs went to %v, want both GPUs", seen)
	}
}

// TestDaemon_FakeGPUMeasurement: a timed run on a fake H200 passes the
// gate, is sampled, and stores its telemetry and clock profile; clocks are
// locked as configured and reset at stop; a run during which the GPU
// throttles is retried and, throttling every time, never scored.
func TestDaemon_FakeGPUMeasurement(t *testing.T) {
	t.Parallel()
	var throttle atomic.Bool
	var reads atomic.Int64
	fake := &gputest.NVML{Driver: "580.0", GPUs: []gputest.GPU{{Name: "NVIDIA H200", UUID: "GPU-aaaa", Minor: 0, PCI: "00000000:00:06.0",
		NUMA: -1, Temp: 45, SMClockMHz: 1500, MaxSMMHz: 1980, PowerMW: 300000,
		// When armed, every second reading after the gate's says "thermal".
		ReasonsFunc: func() uint64 {
			if throttle.Load() && reads.Add(1)%2 == 0 {
				return gpu.ReasonSwThermal
			}
			return 0
		}}}}
	td := startDaemonWith(t, t.TempDir(), func(c *Config) {
		c.CPUSlots, c.GPUs = 0, "auto"
		c.Measurement.Wait, c.Measurement.SampleEvery, c.Measurement.HealthWait = 100*time.Millisecond, 10*time.Millisecond, 100*time.Millisecond
		c.Measurement.Clocks = map[string]runner.ClockSetting{"H200": {Lo: 1500, Hi: 1500}}
	}, func(d *Daemon) {
		d.nvml = fake
		d.gpuRoot = filepath.Join("..", "gpu", "testdata", "nvidia")
	})
	ctx := t.Context()
	if fake.GPUs[0].Locked != [2]uint32{1500, 1500} {
		t.Errorf("clocks at start = %v, want locked at 1500", fake.GPUs[0].Locked)
	}
	td.loadQuickOn("[H200]")
	code := []byte("SLEEP = 0.3\ndef custom_kernel(xs):\n    return [2 * x for x in xs]\n")

	sub, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", Mode: "benchmark", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	v, err := td.admin.Wait(ctx, sub.ID, nil)
	if err != nil || !v.Passed {
		t.Fatalf("benchmark on the fake H200: %+v, %v", v, err)
	}
	var tel struct {
		Gate    *gpu.Telemetry `json:"gate"`
		Samples int            `json:"samples"`
		Clock   uint32         `json:"sm_clock_min_mhz"`
	}
	var info map[string]any
	if err := json.Unmarshal(v.Runs[0].Telemetry, &tel); err != nil || tel.Gate == nil || tel.Samples < 2 || tel.Clock != 1500 {
		t.Errorf("telemetry = %s (%v); want the gate's reading and samples at 1500 MHz", v.Runs[0].Telemetry, err)
	}
	if err := json.Unmarshal(v.Runs[0].SystemInfo, &info); err != nil || info["clocks"] != "locked 1500-1500 MHz" || info["gpu_uuid"] != "GPU-aaaa" || info["driver"] != "580.0" {
		t.Errorf("system info = %s; want the clock profile, GPU UUID and driver", v.Runs[0].SystemInfo)
	}
	if iso, ok := runner.IsolationOf(info); !ok || !iso.Sandbox || iso.Kernel == "" {
		t.Errorf("system info = %s; want its isolation: the sandbox, and the kernel", v.Runs[0].SystemInfo)
	}
	if v.Unsandboxed || v.Unranked != "" {
		t.Errorf("a sandboxed run's submission: unsandboxed %v, unranked %q", v.Unsandboxed, v.Unranked)
	}

	throttle.Store(true)
	sub, err = td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", Mode: "benchmark", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	v, err = td.admin.Wait(ctx, sub.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != api.StatusFailed || v.Runs[0].Attempts != 3 || !strings.Contains(v.Reason, "throttled") || v.Score != nil {
		t.Errorf("a run that throttles every time = %s after %d attempts (%q); want failed after 3, throttled, no score", v.Status, v.Runs[0].Attempts, v.Reason)
	}
	// Test mode is not timed: a throttle does not matter there.
	sub, err = td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", Mode: "test", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if v, err = td.admin.Wait(ctx, sub.ID, nil); err != nil || !v.Passed {
		t.Errorf("test mode while throttling: %+v, %v; want passed", v, err)
	}

	// A process left on the GPU after a job: the slot is drained, jobs of
	// its type wait, and an organiser undrains it once it is clean.
	throttle.Store(false)
	td.waitSlotIdle(0) // the last job's health check is done
	fake.Set(func(g []gputest.GPU) { g[0].Procs = []uint32{31337} })
	sub, err = td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", Mode: "test", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if v, err = td.admin.Wait(ctx, sub.ID, nil); err != nil || !v.Passed {
		t.Fatalf("test run before the drain: %+v, %v", v, err)
	}
	waitFor(t, 10*time.Second, func() bool {
		st, err := td.admin.GPUs(ctx)
		return err == nil && st.Slots[0].State == "drained" && strings.Contains(st.Slots[0].Drained, "1 compute processes")
	})
	waiting, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", Mode: "test", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, code := td.cli(td.token, "gpus"); code != 0 || !strings.Contains(out, "drained (unhealthy after job") {
		t.Errorf("kernelbox gpus = exit %d:\n%s\nwant the slot drained with its reason", code, out)
	}
	if s, _ := td.admin.Submission(ctx, waiting.ID, false); s.Status != api.StatusQueued {
		t.Errorf("a submission for a drained GPU is %s, want queued", s.Status)
	}
	fake.Set(func(g []gputest.GPU) { g[0].Procs = nil })
	if _, errOut, code := td.cli(td.token, "admin", "gpu", "undrain", "GPU-aaaa"); code != 0 {
		t.Fatalf("admin gpu undrain = exit %d: %s", code, errOut)
	}
	if v, err = td.admin.Wait(ctx, waiting.ID, nil); err != nil || !v.Passed {
		t.Errorf("the waiting submission after the undrain: %+v, %v", v, err)
	}
	// A hardware Xid during a job drains the GPU too; a program's fault
	// (Xid 43) alone would not (gpu's TestMonitor_Health).
	td.waitSlotIdle(0) // the last job's health check is done
	fake.Xid("GPU-aaaa", 79)
	sub, err = td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", Mode: "test", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := td.admin.Wait(ctx, sub.ID, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool {
		st, err := td.admin.GPUs(ctx)
		return err == nil && st.Slots[0].State == "drained" && strings.Contains(st.Slots[0].Drained, "Xid 79 (GPU has fallen off the bus)")
	})
	td.stop()
	if fake.GPUs[0].Locked != [2]uint32{} { // the daemon has stopped: no lock needed
		t.Errorf("clocks after stop = %v, want reset", fake.GPUs[0].Locked)
	}
}

// TestDaemon_FakeGPUProfile: profile mode on a fake H200 runs the harness
// under ncu (the stand-in of problems/testdata/fakencu, bound into the
// sandbox) with the NVTX filter, the kernel cap and, the clocks being
// locked, ncu's clock control off; the report is kept, downloadable by its
// owner only (`submissions show --profile`), summarised in the result, and
// removed with the submission.
func TestDaemon_FakeGPUProfile(t *testing.T) {
	t.Parallel()
	ncu, err := filepath.Abs(filepath.Join("..", "problems", "testdata", "fakencu", "ncu"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	td := startDaemonWith(t, dir, func(c *Config) {
		c.CPUSlots, c.GPUs = 0, "auto"
		c.Profiler.NCU, c.Profiler.MaxKernels = ncu, 4
		c.Measurement.Clocks = map[string]runner.ClockSetting{"H200": {Lo: 1500, Hi: 1500}}
	}, func(d *Daemon) {
		d.nvml = &gputest.NVML{Driver: "580.0", GPUs: []gputest.GPU{{Name: "NVIDIA H200", UUID: "GPU-aaaa", Minor: 0,
			PCI: "00000000:00:06.0", NUMA: -1, Temp: 40, SMClockMHz: 1500, MaxSMMHz: 1980, PowerMW: 100000}}}
		d.gpuRoot = filepath.Join("..", "gpu", "testdata", "nvidia")
	})
	ctx := t.Context()
	td.loadQuickOn("[H200]")
	if out, _, code := td.cli(td.token, "gpus"); code != 0 || !strings.Contains(out, "profile mode runs Nsight Compute ("+ncu+", at most 4 kernels") ||
		!strings.Contains(out, "locked 1500-1500 MHz") || !strings.Contains(out, "40°C 1500 MHz 100 W 0 procs") {
		t.Errorf("kernelbox gpus = exit %d:\n%s\nwant the profiler, the clock lock and the GPU's reading", code, out)
	}
	alice, aliceToken := td.user("alice")
	code := []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")
	sub, err := alice.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", Mode: "profile", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, rc := td.cli(aliceToken, "submissions", "show", strconv.FormatInt(sub.ID, 10), "--wait", "--profile", filepath.Join(dir, "out.ncu-rep"))
	if rc != 0 {
		t.Fatalf("submissions show --profile = exit %d: %s", rc, errOut)
	}
	for _, want := range []string{"Nsight Compute, 3 kernels in the custom_kernel range", "kernel 1: add_kernel",
		"throughput  time 23.42 us", fmt.Sprintf("kernelbox submissions show %d --profile out.ncu-rep", sub.ID)} {
		if !strings.Contains(out, want) {
			t.Errorf("submissions show lacks %q:\n%s", want, out)
		}
	}
	saved, err := os.ReadFile(filepath.Join(dir, "out.ncu-rep"))
	want := "fake ncu report: --target-processes all --nvtx --nvtx-include custom_kernel/ --launch-count 4 --clock-control none --section SpeedOfLight"
	if err != nil || !strings.HasPrefix(string(saved), want) {
		t.Errorf("the downloaded report = %q, %v; want it to start %q", saved, err, want)
	}
	v, err := alice.Submission(ctx, sub.ID, false)
	if err != nil || !v.Passed || v.Runs[0].Profile == "" {
		t.Fatalf("the profiled submission = %+v, %v", v, err)
	}
	kept := filepath.Join(profilesDir(dir), v.Runs[0].Profile)
	if st, err := os.Stat(kept); err != nil || st.Mode().Perm()&0o077 != 0 {
		t.Errorf("the kept report %s: %v, %v; want it readable by the daemon only", kept, st, err)
	}

	// Bob may not fetch Alice's report, and a run without one says so.
	_, bobToken := td.user("bob")
	if _, errOut, rc := td.cli(bobToken, "submissions", "show", strconv.FormatInt(sub.ID, 10), "--profile", filepath.Join(dir, "bob.ncu-rep")); rc == 0 ||
		!strings.Contains(errOut, fmt.Sprintf("no submission %d", sub.ID)) {
		t.Errorf("bob's download of alice's report = exit %d: %s", rc, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "bob.ncu-rep")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused download left a file: %v", err)
	}
	plain, err := alice.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", Mode: "test", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Wait(ctx, plain.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := alice.Profile(ctx, plain.ID, 0, io.Discard); api.ErrorCode(err) != api.CodeNotFound || !strings.Contains(err.Error(), "no Nsight Compute report") {
		t.Errorf("the report of a test run = %v, want not found", err)
	}

	if _, errOut, rc := td.cli(td.token, "admin", "delete", strconv.FormatInt(sub.ID, 10)); rc != 0 {
		t.Fatalf("admin delete = exit %d: %s", rc, errOut)
	}
	if _, err := os.Stat(kept); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the report of a deleted submission is still there: %v", err)
	}
}

// TestDaemon_FakeAMD: on a host whose only GPUs are AMD (the MI325X sysfs
// tree of gpu/testdata/amd, copied so it can be written), the daemon
// gates and samples timed runs through amdgpu's sysfs, fixes the clocks
// with profile_standard as configured, and sets auto again at stop.
func TestDaemon_FakeAMD(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join("..", "gpu", "testdata", "amd"))); err != nil {
		t.Fatal(err)
	}
	level := filepath.Join(root, "sys/bus/pci/devices/0000:05:00.0/power_dpm_force_performance_level")
	td := startDaemonWith(t, t.TempDir(), func(c *Config) {
		c.CPUSlots, c.GPUs = 0, "auto"
		c.Measurement.Wait, c.Measurement.SampleEvery, c.Measurement.HealthWait = 100*time.Millisecond, 10*time.Millisecond, 100*time.Millisecond
		c.Measurement.Clocks = map[string]runner.ClockSetting{"MI325X": {Standard: true}}
	}, func(d *Daemon) {
		d.nvml = &gputest.NVML{InitErr: gpu.ErrNotSupported}
		d.gpuRoot = root
	})
	ctx := t.Context()
	if b, _ := os.ReadFile(level); strings.TrimSpace(string(b)) != "profile_standard" {
		t.Errorf("performance level at start = %q, want profile_standard", b)
	}
	out, _, code := td.cli(td.token, "gpus")
	if code != 0 || !strings.Contains(out, "amd driver") || !strings.Contains(out, "MI325X") || !strings.Contains(out, "profile_standard") ||
		!strings.Contains(out, "52°C 1300 MHz 301 W 0 procs") {
		t.Errorf("kernelbox gpus = exit %d:\n%s\nwant the MI325X slot with profile_standard and a reading", code, out)
	}
	td.loadQuickOn("[MI325X]")
	sub, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", GPU: "MI325X", Mode: "benchmark",
		Code: []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")})
	if err != nil {
		t.Fatal(err)
	}
	v, err := td.admin.Wait(ctx, sub.ID, nil)
	if err != nil || !v.Passed {
		t.Fatalf("benchmark on the fake MI325X: %+v, %v", v, err)
	}
	var tel struct {
		Gate    *gpu.Telemetry `json:"gate"`
		Samples int            `json:"samples"`
		TempMax uint32         `json:"temp_max_c"`
	}
	if err := json.Unmarshal(v.Runs[0].Telemetry, &tel); err != nil || tel.Gate == nil || tel.Samples < 2 || tel.TempMax != 52 {
		t.Errorf("telemetry = %s (%v); want the gate's reading and samples at 52 °C", v.Runs[0].Telemetry, err)
	}
	var info map[string]any
	if err := json.Unmarshal(v.Runs[0].SystemInfo, &info); err != nil || info["clocks"] != "profile_standard" {
		t.Errorf("system info = %s; want the clock profile profile_standard", v.Runs[0].SystemInfo)
	}
	td.stop()
	if b, _ := os.ReadFile(level); strings.TrimSpace(string(b)) != "auto" {
		t.Errorf("performance level after stop = %q, want auto", b)
	}
}

// TestDaemon_FakeMIG: an H200 with MIG on is two slots, one per instance;
// a run on one gets its instance's capability nodes, not its sibling's,
// with its MIG UUID in CUDA_VISIBLE_DEVICES, and its timings are not gated
// or sampled (the clocks are the parent's).
func TestDaemon_FakeMIG(t *testing.T) {
	t.Parallel()
	td := startDaemonWith(t, t.TempDir(), func(c *Config) { c.CPUSlots, c.GPUs = 0, "auto" }, func(d *Daemon) {
		d.nvml = &gputest.NVML{Driver: "580.0", GPUs: []gputest.GPU{{Name: "NVIDIA H200", UUID: "GPU-aaaa", Minor: 0,
			PCI: "00000000:00:06.0", NUMA: -1, MIG: []gpu.MIGDevice{
				{UUID: "MIG-1111", Name: "NVIDIA H200 MIG 3g.71gb", GI: 1, CI: 0},
				{UUID: "MIG-2222", Name: "NVIDIA H200 MIG 3g.71gb", GI: 2, CI: 0},
			}}}}
		d.gpuRoot = filepath.Join("..", "gpu", "testdata", "nvidia")
	})
	ctx := t.Context()
	h, err := td.admin.Health(ctx)
	if err != nil || h.GPUs["H200-MIG-3g.71gb"] != 2 {
		t.Fatalf("Health() = %+v, %v; want 2 slots of H200-MIG-3g.71gb", h, err)
	}
	td.loadQuickOn("[H200-MIG-3g.71gb]")
	probe := []byte(`import os
print("VISIBLE", os.environ.get("CUDA_VISIBLE_DEVICES"))
print("CAPS", " ".join(sorted(os.listdir("/dev/nvidia-caps"))))
def custom_kernel(xs):
    return [2 * x for x in xs]
`)
	sub, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quickgpu", Mode: "benchmark", Code: probe})
	if err != nil {
		t.Fatal(err)
	}
	v, err := td.admin.Wait(ctx, sub.ID, nil)
	if err != nil || !v.Passed {
		t.Fatalf("a run on a MIG instance: %+v, %v", v, err)
	}
	var rep problems.Report
	if err := json.Unmarshal(v.Runs[0].Report, &rep); err != nil {
		t.Fatal(err)
	}
	stdout := rep.Phases[len(rep.Phases)-1].Stdout
	want := map[string]string{"MIG-1111": "CAPS nvidia-cap12 nvidia-cap13\n", "MIG-2222": "CAPS nvidia-cap21 nvidia-cap22\n"}[v.Runs[0].GPUID]
	if want == "" || !strings.Contains(stdout, "VISIBLE "+v.Runs[0].GPUID+"\n") || !strings.Contains(stdout, want) {
		t.Errorf("run on %s printed %q; want its MIG UUID and %q", v.Runs[0].GPUID, stdout, want)
	}
	if len(v.Runs[0].Telemetry) != 0 {
		t.Errorf("a MIG run has telemetry %s; its readings would be its parent's", v.Runs[0].Telemetry)
	}
}

// TestDaemon_Scanner: a timed submission that patches the harness's timer
// is refused with the rule and line; the same code in test mode is not
// scanned; one that starts a thread is accepted but flagged, kept out of
// the ranking until an organiser clears it, and a confirmed one is marked
// hacked.
func TestDaemon_Scanner(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	ctx := t.Context()
	alice, aliceToken := td.user("alice")
	bob, _ := td.user("bob")
	patch := []byte("import time\ntime.perf_counter_ns = lambda: 0\ndef custom_kernel(xs):\n    return [2 * x for x in xs]\n")
	_, err := alice.Submit(ctx, api.SubmitRequest{Leaderboard: "quick", Mode: "leaderboard", Code: patch})
	if api.ErrorCode(err) != api.CodeForbidden || !strings.Contains(err.Error(), "TIMER_PATCH (line 2: time.perf_counter_ns = lambda: 0)") {
		t.Errorf("a timer patch in leaderboard mode = %v; want refused, naming the rule and line", err)
	}
	if sub, err := alice.Submit(ctx, api.SubmitRequest{Leaderboard: "quick", Mode: "test", Code: patch}); err != nil || len(sub.Findings) != 0 {
		t.Errorf("the same in test mode = %+v, %v; want accepted, not scanned", sub, err)
	}

	threaded := []byte("import threading\ndef custom_kernel(xs):\n    return [2 * x for x in xs]\n")
	flagged, err := alice.Submit(ctx, api.SubmitRequest{Leaderboard: "quick", Mode: "leaderboard", Code: threaded})
	if err != nil || flagged.Review != api.ReviewFlagged || len(flagged.Findings) != 1 || flagged.Findings[0].Rule != "THREADS" {
		t.Fatalf("a threaded submission = %+v, %v; want accepted and flagged THREADS", flagged, err)
	}
	honest, err := bob.Submit(ctx, api.SubmitRequest{Leaderboard: "quick", Mode: "leaderboard", Code: []byte("SCALE = 3\ndef custom_kernel(xs):\n    return [2 * x for x in xs]\n")})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{flagged.ID, honest.ID} {
		if v, err := td.admin.Wait(ctx, id, nil); err != nil || !v.Passed {
			t.Fatalf("submission %d: %+v, %v", id, v, err)
		}
	}
	users := func() []string {
		r, err := td.admin.Ranking(ctx, "quick", "cpu")
		if err != nil || len(r.Rankings) != 1 {
			t.Fatalf("ranking = %+v, %v", r, err)
		}
		var out []string
		for _, row := range r.Rankings[0].Rows {
			out = append(out, row.User)
		}
		return out
	}
	if got := users(); !slices.Equal(got, []string{"bob"}) {
		t.Errorf("ranking with alice's flagged submission = %v, want bob only", got)
	}
	out, _, code := td.cli(td.token, "admin", "review")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d   alice", flagged.ID)) || !strings.Contains(out, "THREADS line 1: import threading") {
		t.Errorf("admin review = exit %d:\n%s", code, out)
	}
	if _, errOut, code := td.cli(aliceToken, "admin", "review", "clear", strconv.FormatInt(flagged.ID, 10)); code == 0 {
		t.Errorf("a contestant cleared her own flag: %s", errOut)
	}
	if _, errOut, code := td.cli(td.token, "admin", "review", "clear", strconv.FormatInt(honest.ID, 10)); code == 0 || !strings.Contains(errOut, "was not flagged") {
		t.Errorf("clearing an unflagged submission = exit %d: %s", code, errOut)
	}
	if _, errOut, code := td.cli(td.token, "admin", "review", "clear", strconv.FormatInt(flagged.ID, 10)); code != 0 {
		t.Fatalf("admin review clear = exit %d: %s", code, errOut)
	}
	// Both run the same kernel, so which is faster is noise: only
	// membership is asserted.
	if got := users(); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"alice", "bob"}) {
		t.Errorf("ranking after the clear = %v, want alice and bob", got)
	}
	if _, errOut, code := td.cli(td.token, "admin", "review", "confirm", strconv.FormatInt(flagged.ID, 10)); code != 0 {
		t.Fatalf("admin review confirm = exit %d: %s", code, errOut)
	}
	if s, err := td.admin.Submission(ctx, flagged.ID, false); err != nil || !s.Hacked || s.Review != api.ReviewConfirmed {
		t.Errorf("after confirm: %+v, %v; want hacked and confirmed", s, err)
	}
	if got := users(); !slices.Equal(got, []string{"bob"}) {
		t.Errorf("ranking after the confirm = %v, want bob only", got)
	}
	if out, _, _ := td.cli(td.token, "admin", "review"); !strings.Contains(out, "no submission waits for review") {
		t.Errorf("admin review after both = %s", out)
	}
}

// TestDaemon_MeasuredCPUFloor: with no ceilings in the config, a CPU slot
// is held to this host's measured bandwidth, which no run beats on a
// petabyte a case.
func TestDaemon_MeasuredCPUFloor(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuickAs("petabyte", "ranking_by: geom", "ranking_by: geom\nfloor: {bytes: \"1e15 * n\"}")
	alice, _ := td.user("alice")
	sub, err := alice.Submit(t.Context(), api.SubmitRequest{Leaderboard: "petabyte", Mode: "benchmark", Code: []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")})
	if err != nil {
		t.Fatal(err)
	}
	v, err := td.admin.Wait(t.Context(), sub.ID, nil)
	if err != nil || !v.Passed {
		t.Fatalf("submission = %+v, %v; want passed", v, err)
	}
	var rules []string
	for _, f := range v.Findings {
		rules = append(rules, f.Rule)
	}
	if want := []string{problems.FlagPhysicsFloor, problems.FlagPhysicsFloor}; !slices.Equal(rules, want) {
		t.Errorf("findings %+v, want %v (both benchmarks under the measured floor)", v.Findings, want)
	}
}

// TestDaemon_PhysicsFloor: a ranked time under the problem's physics floor
// (bytes moved at the slot's peak bandwidth, here a CPU slot given an
// absurdly low one) flags the submission out of the rankings, and its score
// counts each shape at the floor, not below.
func TestDaemon_PhysicsFloor(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), func(c *Config) {
		c.Measurement.Ceilings = map[string]problems.Ceilings{"cpu": {BytesPerSec: 1e6}}
	})
	td.loadQuickAs("floored", "ranking_by: geom", "ranking_by: geom\nfloor: {bytes: \"16 * n\"}")
	ctx := t.Context()
	alice, _ := td.user("alice")
	sub, err := alice.Submit(ctx, api.SubmitRequest{Leaderboard: "floored", Mode: "leaderboard", Code: []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")})
	if err != nil {
		t.Fatal(err)
	}
	v, err := td.admin.Wait(ctx, sub.ID, nil)
	if err != nil || !v.Passed || v.Score == nil {
		t.Fatalf("submission = %+v, %v; want passed with a score", v, err)
	}
	// Floors 1.6 ms and 16 ms at 1 MB/s, halved by the default slack.
	if want := math.Sqrt(0.8e-3 * 8e-3); math.Abs(*v.Score-want) > 1e-9 {
		t.Errorf("score = %v s, want %v (each shape at its floor)", *v.Score, want)
	}
	var floor []policies.Finding
	for _, f := range v.Findings {
		if f.Rule == problems.FlagPhysicsFloor {
			floor = append(floor, f)
		}
	}
	// Both shapes, in both the public and the secret run.
	if v.Review != api.ReviewFlagged || len(floor) != 4 || !strings.Contains(floor[0].Message, "benchmark 0 (n: 100; seed: 3): mean") {
		t.Errorf("review %q, findings %+v; want flagged with four PHYSICS_FLOOR findings naming the public case", v.Review, v.Findings)
	}
	if r, err := td.admin.Ranking(ctx, "floored", "cpu"); err != nil || len(r.Rankings) != 1 || len(r.Rankings[0].Rows) != 0 {
		t.Errorf("ranking = %+v, %v; want nobody (the only submission is flagged)", r, err)
	}
	if out, _, code := td.cli(td.token, "admin", "review"); code != 0 || !strings.Contains(out, "PHYSICS_FLOOR: benchmark 0 (n: 100; seed: 3): mean") {
		t.Errorf("admin review = exit %d:\n%s", code, out)
	}
}
