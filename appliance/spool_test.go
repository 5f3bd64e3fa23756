package appliance

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

// eventLog is the coordinator's store as the shared directory's events
// reach it.
type eventLog struct {
	mu  sync.Mutex
	got []api.Payload
}

func (l *eventLog) append(_ context.Context, _ int64, p api.Payload) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, p)
	return nil
}

func (l *eventLog) take() []api.Payload {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.got
	l.got = nil
	return got
}

// spoolAttemptForTest is one attempt of job published in a new shared
// directory: the coordinator's side (its events logged), the attempt's
// directory and the node's side.
func spoolAttemptForTest(t *testing.T, job api.NodeJob, bound int64) (*slurm, *eventLog, *spoolOut, *spoolLink) {
	t.Helper()
	root := spoolRoot(t.TempDir(), "0123abcd")
	if err := openSpool(root, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	events := &eventLog{}
	s := &slurm{log: testLogger(t), spool: root, appendEvent: events.append}
	out, err := publishSpool(root, "tok", job, bound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(out.remove)
	return s, events, out, &spoolLink{dir: spoolAttempt(root, "tok"), run: job.Run, log: testLogger(t)}
}

// The shared directory carries what the node API carries, both ways, and
// refuses what the API refuses: another token's run, a second report, a
// report too large, and anything from an attempt that has ended.
func TestSpool_Exchange(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	shared := t.TempDir()
	if err := openSpool(spoolRoot(filepath.Join(shared, "not-mounted"), "0123abcd"), testLogger(t)); err == nil ||
		!strings.Contains(err.Error(), "is the cluster's shared filesystem mounted?") {
		t.Errorf("openSpool in a shared directory that is not there = %v, want it named", err)
	}
	root := spoolRoot(shared, "0123abcd")
	stale := filepath.Join(root, "an-earlier-boot")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := openSpool(root, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("an earlier boot's directory after openSpool: %v, want gone", err)
	}
	if st, err := os.Stat(root); err != nil {
		t.Errorf("the coordinator's directory: %v; want mode 0700", err)
	} else if st.Mode().Perm() != 0o700 {
		t.Errorf("the coordinator's directory: %v; want mode 0700", st.Mode())
	}

	var events eventLog
	s := &slurm{log: testLogger(t), spool: root, appendEvent: events.append}
	job := api.NodeJob{Run: 5, Submission: 9, Mode: "test", GPUType: "cpu", GPUs: 1, Code: []byte("def custom_kernel(x): return x\n"),
		Problem: map[string][]byte{"task.yml": []byte("files: {}\n")}, ProblemSHA: "sha"}
	out, err := publishSpool(root, "tok3n", job, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	link := &spoolLink{dir: spoolAttempt(root, "tok3n"), run: 5, log: testLogger(t)}

	got, err := link.job(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job.MaxResult = 1 << 20 // the bound travels with the job
	if diff := cmp.Diff(job, *got); diff != "" {
		t.Errorf("the job as the node reads it (-sent +read):\n%s", diff)
	}
	for _, l := range []*spoolLink{{dir: spoolAttempt(root, "not-its-token"), run: 5}, {dir: link.dir, run: 6}} {
		if _, err := l.job(ctx); err == nil {
			t.Errorf("run %d in %s: no error, want one", l.run, filepath.Base(l.dir))
		}
	}

	// Events, and a line the node is still writing.
	test := api.RunTest{Phase: "test", Index: 0, Spec: "n: 4", Status: "pass"}
	phase := api.RunPhase{Phase: "test", Passed: true}
	for _, ev := range []api.NodeEvent{{Test: &test}, {Phase: &phase}} {
		if err := link.event(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(link.dir, spoolEventsFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"test":{"phase":"benchmark",`); err != nil {
		t.Fatal(err)
	}
	if res, err := s.spoolResult(ctx, s.log, job, out, false); res != nil || err != nil {
		t.Fatalf("before the report: %+v, %v; want nothing yet", res, err)
	}
	test.Run, phase.Run = 5, 5
	if diff := cmp.Diff([]api.Payload{test, phase}, events.take()); diff != "" {
		t.Errorf("events passed on (-want +got):\n%s", diff)
	}
	if _, err := f.WriteString(`"index":1,"status":"pass"}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := s.spoolResult(ctx, s.log, job, out, false); err != nil {
		t.Fatal(err)
	}
	if got := events.take(); len(got) != 1 || got[0].(api.RunTest).Phase != "benchmark" || got[0].(api.RunTest).Index != 1 {
		t.Errorf("the line finished later = %+v, want the benchmark case 1", got)
	}

	// The first report is the one kept.
	first := api.NodeResult{Report: &problems.Report{Problem: "quick", Passed: true}, Wall: 42}
	if err := link.result(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := link.result(ctx, api.NodeResult{Error: "a second report"}); err != nil {
		t.Errorf("a second report = %v, want taken as had already", err)
	}
	res, err := s.spoolResult(ctx, s.log, job, out, false)
	if err != nil || res == nil {
		t.Fatalf("after the report: %v, %v", res, err)
	}
	if diff := cmp.Diff(first, *res); diff != "" {
		t.Errorf("the report (-sent +read):\n%s", diff)
	}

	// The attempt ends: a node that comes back late finds nowhere to write.
	out.remove()
	if err := link.result(ctx, first); err == nil {
		t.Error("a report after the attempt ended: no error")
	}
	if err := link.event(ctx, api.NodeEvent{Phase: &phase}); err == nil {
		t.Error("an event after the attempt ended: no error")
	}
	if _, err := link.job(ctx); err == nil || !strings.Contains(err.Error(), "no run 5") {
		t.Errorf("the job after the attempt ended = %v, want no run 5", err)
	}
	if left, _ := os.ReadDir(root); len(left) != 0 {
		t.Errorf("the coordinator's directory after the attempt's end holds %v, want nothing", left)
	}
}

// The coordinator's part of a shared scratch area is refused when it is
// a link or another user's: its name is public (it is in every job's
// comment), and clearing it must never reach outside it.
func TestSpool_RefusesALink(t *testing.T) {
	t.Parallel()
	shared, victim := t.TempDir(), t.TempDir()
	keep := filepath.Join(victim, "kernelbox.db")
	if err := os.WriteFile(keep, []byte("the data"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := spoolRoot(shared, "0123abcd")
	if err := os.Symlink(victim, root); err != nil {
		t.Fatal(err)
	}
	err := openSpool(root, testLogger(t))
	if err == nil || !strings.Contains(err.Error(), "not a directory of this user's") {
		t.Errorf("openSpool on a link = %v, want refused", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the link's target after openSpool: %v, want untouched", err)
	}
}

// A report over the coordinator's bound goes without its Nsight Compute
// report, as through the API, rather than failing the run; the events
// appended before the report all arrive with it.
func TestSpool_ReportOverTheBound(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	job := api.NodeJob{Run: 4, Submission: 2, Mode: "profile"}
	s, events, out, link := spoolAttemptForTest(t, job, 4096)
	if _, err := link.job(ctx); err != nil {
		t.Fatal(err)
	}
	if err := link.event(ctx, api.NodeEvent{Phase: &api.RunPhase{Phase: "profile", Passed: true}}); err != nil {
		t.Fatal(err)
	}
	big := api.NodeResult{Report: &problems.Report{Passed: true, Profile: &problems.ProfileResult{Tool: "ncu", Summary: "sections"}},
		Profile: make([]byte, 8192)}
	if err := link.result(ctx, big); err != nil {
		t.Fatal(err)
	}
	res, err := s.spoolResult(ctx, s.log, job, out, false)
	if err != nil || res == nil {
		t.Fatalf("the report = %v, %v", res, err)
	}
	if len(res.Profile) != 0 || !strings.Contains(res.Report.Profile.Summary, "over the coordinator's limit") {
		t.Errorf("the report over the bound: %d profile bytes, summary %q; want none, and the summary saying why", len(res.Profile), res.Report.Profile.Summary)
	}
	if got := events.take(); len(got) != 1 {
		t.Errorf("events with the report = %v, want the phase", got)
	}
	if big.Report.Profile.Summary != "sections" {
		t.Errorf("the node's own report was changed: %q", big.Report.Profile.Summary)
	}
}

// A secret run's cases carry its seed's inputs: its node's test events are
// not logged, as through the API; a report over the bound is the
// attempt's failure, not read.
func TestSpool_SecretAndBounds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	job := api.NodeJob{Run: 8, Submission: 3, Mode: "leaderboard", Secret: true}
	s, events, out, link := spoolAttemptForTest(t, job, 200)
	for _, ev := range []api.NodeEvent{{Test: &api.RunTest{Phase: "leaderboard", Spec: "seed: 1234"}}, {Phase: &api.RunPhase{Phase: "leaderboard", Passed: true}}} {
		if err := link.event(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := link.result(ctx, api.NodeResult{Report: &problems.Report{Passed: true, Reason: strings.Repeat("x", 300)}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.spoolResult(ctx, s.log, job, out, false)
	if err == nil || !strings.Contains(err.Error(), "over the coordinator's bound") {
		t.Errorf("a report over the bound = %+v, %v; want refused", res, err)
	}
	got := events.take()
	if len(got) != 1 {
		t.Fatalf("a secret run's events logged = %+v, want its phase alone", got)
	}
	if p, ok := got[0].(api.RunPhase); !ok || !p.Secret || p.Run != 8 {
		t.Errorf("the phase logged = %+v, want run 8's, marked secret", got[0])
	}
}

// A coordinator with no URL is named by an id kept in its data
// directory: the same across restarts, another for another coordinator.
func TestCoordinatorID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := coordinatorID(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := coordinatorID(filepath.Join(dir, "a"))
	if err != nil || again != a {
		t.Errorf("the id read again = %q, %v; want %q", again, err, a)
	}
	if other, _ := coordinatorID(filepath.Join(dir, "b")); other == a || len(other) != 32 {
		t.Errorf("another coordinator's id = %q, want 32 hex digits other than %q", other, a)
	}
}

// A node asks its attempt's directory whether the attempt stands: it
// does until the coordinator removes it.
func TestSpool_Standing(t *testing.T) {
	t.Parallel()
	_, _, out, link := spoolAttemptForTest(t, api.NodeJob{Run: 3}, 1<<20)
	if ok, err := link.standing(t.Context()); !ok || err != nil {
		t.Errorf("standing() while the attempt is out = %v, %v; want true", ok, err)
	}
	out.remove()
	if ok, err := link.standing(t.Context()); ok || err != nil {
		t.Errorf("standing() once the attempt ended = %v, %v; want false, no error", ok, err)
	}
}
