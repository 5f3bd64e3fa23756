package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kernelbox/appliance/api"
	"kernelbox/queue"
)

func newTestStore(t *testing.T) *Store {
	t.Helper()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex // submissions may be stored at once (TestStore_LimitsHoldUnderConcurrency)
	st, err := Open(t.Context(), filepath.Join(t.TempDir(), "kernelbox.db"), func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// testJobs are one queue job a run, under the run's key, as the service
// makes them.
func testJobs(subID int64, runs []api.Run) ([]queue.NewJob, error) {
	var jobs []queue.NewJob
	for _, r := range runs {
		jobs = append(jobs, queue.NewJob{User: "ann", GPUType: r.GPUType, Key: fmt.Sprintf("run:%d", r.ID),
			Payload: []byte(fmt.Sprintf(`{"run":%d,"submission":%d}`, r.ID, subID))})
	}
	return jobs, nil
}

// leaderboardAndUser puts leaderboard lb (cpu, geom) and contestant ann
// in the store.
func leaderboardAndUser(t *testing.T, st *Store) (*Leaderboard, *User) {
	t.Helper()
	ctx := t.Context()
	if _, err := st.PutLeaderboard(ctx, LeaderboardSpec{Name: "lb", Lang: "py", RankingBy: "geom", GPUs: []string{"cpu"}, ProblemDir: "/x"}); err != nil {
		t.Fatal(err)
	}
	lb, err := st.Leaderboard(ctx, "lb")
	if err != nil {
		t.Fatal(err)
	}
	u, _, err := st.CreateUser(ctx, "ann", api.RoleContestant)
	if err != nil {
		t.Fatal(err)
	}
	return lb, u
}

// scored stores a leaderboard submission whose public run scores score and
// whose secret run passes or not.
func scored(t *testing.T, st *Store, lb *Leaderboard, u *User, score float64, secretPasses bool) int64 {
	t.Helper()
	return finished(t, st, lb, u, func(r api.Run) RunResult {
		if r.Secret && !secretPasses {
			return RunResult{Status: api.StatusDone, Reason: "test 3 (secret case) wrong"}
		}
		return RunResult{Status: api.StatusDone, Passed: true, Score: &score}
	})
}

// finished stores a leaderboard submission with its secret twin and ends
// each run with what result says of it.
func finished(t *testing.T, st *Store, lb *Leaderboard, u *User, result func(api.Run) RunResult) int64 {
	t.Helper()
	ctx := t.Context()
	sub, err := st.CreateSubmission(ctx, NewSubmission{Leaderboard: lb, User: u, FileName: "s.py", Code: []byte("x = 1\n"),
		GPUType: "cpu", Mode: "leaderboard", Category: api.CategoryRanked, Secret: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sub.Runs {
		if ok, err := st.StartRun(ctx, r.ID, "lease", "cpu:0"); err != nil || !ok {
			t.Fatalf("StartRun: %v, %v", ok, err)
		}
		if _, err := st.FinishRun(ctx, r.ID, "lease", result(r)); err != nil {
			t.Fatal(err)
		}
	}
	return sub.ID
}

func TestStore_Ranking(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := t.Context()
	if _, err := st.PutLeaderboard(ctx, LeaderboardSpec{Name: "lb", Lang: "py", RankingBy: "geom", GPUs: []string{"cpu"}, ProblemDir: "/x"}); err != nil {
		t.Fatal(err)
	}
	lb, err := st.Leaderboard(ctx, "lb")
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]*User{}
	for _, n := range []string{"ann", "bob", "cid", "dan", "eve"} {
		u, _, err := st.CreateUser(ctx, n, api.RoleContestant)
		if err != nil {
			t.Fatal(err)
		}
		users[n] = u
	}
	scored(t, st, lb, users["ann"], 3, true)
	annBest := scored(t, st, lb, users["ann"], 2, true)
	scored(t, st, lb, users["ann"], 2, true) // equal to her best, later: not her best
	bob := scored(t, st, lb, users["bob"], 2, true)
	scored(t, st, lb, users["cid"], 1, false) // fastest, but failed the secret run
	cidOK := scored(t, st, lb, users["cid"], 4, true)
	hacked := scored(t, st, lb, users["dan"], 0.5, true)
	if err := st.SetHacked(ctx, hacked, true); err != nil {
		t.Fatal(err)
	}
	scored(t, st, lb, users["eve"], 0.1, true)
	if err := st.SetBanned(ctx, "eve", true); err != nil {
		t.Fatal(err)
	}
	rows, err := st.Ranking(ctx, lb.ID, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Rank  int
		User  string
		Score float64
		Sub   int64
	}
	var got []row
	for _, r := range rows {
		got = append(got, row{r.Rank, r.User, r.Score, r.Submission})
	}
	want := []row{{1, "ann", 2, annBest}, {1, "bob", 2, bob}, {3, "cid", 4, cidOK}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Ranking (-want +got):\n%s", diff)
	}
	if rows, _ := st.Ranking(ctx, lb.ID, "H200"); len(rows) != 0 {
		t.Errorf("Ranking(H200) = %v, want none", rows)
	}
}

func TestStore_SecretFailureHidesItsReason(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := t.Context()
	lb, u := leaderboardAndUser(t, st)
	sub, err := st.Submission(ctx, scored(t, st, lb, u, 1, false))
	if err != nil {
		t.Fatal(err)
	}
	if sub.Passed || sub.Score != nil || sub.Status != api.StatusDone || strings.Contains(sub.Reason, "secret case") {
		t.Errorf("submission failing its secret run = %+v; want done, not passed, no score, the secret case not named", sub)
	}
}

func TestStore_TokensAreHashed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "kernelbox.db")
	st, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := st.CreateUser(t.Context(), "ann", api.RoleContestant)
	if err != nil {
		t.Fatal(err)
	}
	code, err := st.CreateInvite(t.Context(), api.Invite{})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := st.Authenticate(t.Context(), token); err != nil || u.Name != "ann" {
		t.Fatalf("Authenticate(token) = %v, %v", u, err)
	}
	if _, err := st.Authenticate(t.Context(), token+"x"); api.ErrorCode(err) != api.CodeUnauthorized {
		t.Errorf("Authenticate(wrong) = %v, want unauthorized", err)
	}
	st.Close()
	for _, f := range []string{path, path + "-wal"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, secret := range []string{token, code} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s holds a secret in clear text", filepath.Base(f))
			}
		}
	}
}

func TestStore_CancelSettles(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := context.Background()
	lb, u := leaderboardAndUser(t, st)
	sub, err := st.CreateSubmission(ctx, NewSubmission{Leaderboard: lb, User: u, FileName: "s.py", Code: []byte("x\n"),
		GPUType: "cpu", Mode: "leaderboard", Category: api.CategoryRanked, Secret: true, Jobs: testJobs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartRun(ctx, sub.Runs[0].ID, "lease", "cpu:0"); err != nil {
		t.Fatal(err)
	}
	jobs, err := st.CancelSubmission(ctx, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{sub.Runs[0].JobID, sub.Runs[1].JobID}, jobs); diff != "" {
		t.Errorf("CancelSubmission jobs (-want +got):\n%s", diff)
	}
	// The holder's late result is refused: its lease no longer counts.
	if _, err := st.FinishRun(ctx, sub.Runs[0].ID, "lease", RunResult{Status: api.StatusDone, Passed: true}); api.ErrorCode(err) != api.CodeConflict {
		t.Errorf("FinishRun after cancel = %v, want a conflict", err)
	}
	got, err := st.Submission(ctx, sub.ID)
	if err != nil || got.Status != api.StatusCancelled || got.Passed {
		t.Errorf("after cancel: %+v, %v; want cancelled, not passed", got, err)
	}
}

// TestStore_SubmissionAndJobsTogether: a submission and its runs' jobs are
// one transaction in one file: both are there, tied by the run's job id,
// or, when enqueueing fails, neither is.
func TestStore_SubmissionAndJobsTogether(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := t.Context()
	lb, u := leaderboardAndUser(t, st)
	ns := NewSubmission{Leaderboard: lb, User: u, FileName: "s.py", Code: []byte("x\n"), GPUType: "cpu", Mode: "leaderboard",
		Category: api.CategoryRanked, Secret: true, Jobs: testJobs}
	sub, err := st.CreateSubmission(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sub.Runs {
		j, err := st.Queue().Get(ctx, r.JobID)
		if err != nil || j.Key != fmt.Sprintf("run:%d", r.ID) || j.State != queue.Queued {
			t.Errorf("job %d of run %d = %+v, %v; want queued under run:%d", r.JobID, r.ID, j, err, r.ID)
		}
	}
	ns.Code = []byte("y\n")
	ns.Jobs = func(int64, []api.Run) ([]queue.NewJob, error) {
		return []queue.NewJob{{GPUType: "cpu"}, {GPUType: "cpu"}}, nil
	}
	if _, err := st.CreateSubmission(ctx, ns); err == nil {
		t.Fatal("CreateSubmission whose jobs the queue refuses: err = nil")
	}
	subs, err := st.Submissions(ctx, SubmissionFilter{UserID: u.ID, Limit: 10})
	if err != nil || len(subs) != 1 {
		t.Errorf("submissions after a refused enqueue = %d (%v), want the first one only", len(subs), err)
	}
	if d, err := st.Queue().Depth(ctx); err != nil || d["cpu"] != 2 {
		t.Errorf("queue depth = %v (%v), want the first submission's 2 jobs", d, err)
	}
}

// TestStore_IDsNeverReused: once the newest submission is deleted, the
// next one (another user's) gets a new id, so it neither inherits the
// deleted one's event log nor collides with its queue jobs (run:<id>).
func TestStore_IDsNeverReused(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := t.Context()
	lb, ann := leaderboardAndUser(t, st)
	bob, _, err := st.CreateUser(ctx, "bob", api.RoleContestant)
	if err != nil {
		t.Fatal(err)
	}
	ns := NewSubmission{Leaderboard: lb, User: ann, FileName: "s.py", Code: []byte("x\n"), GPUType: "cpu", Mode: "leaderboard",
		Category: api.CategoryRanked, Secret: true, Jobs: testJobs}
	first, err := st.CreateSubmission(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteSubmission(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	ns.User, ns.Code = bob, []byte("y\n")
	next, err := st.CreateSubmission(ctx, ns)
	if err != nil {
		t.Fatalf("the next submission after a deletion: %v", err)
	}
	if next.ID <= first.ID {
		t.Errorf("next submission id %d; want above the deleted %d", next.ID, first.ID)
	}
	for i, r := range next.Runs {
		if r.ID <= first.Runs[len(first.Runs)-1].ID {
			t.Errorf("run %d of the next submission has id %d; the deleted one's went up to %d", i, r.ID, first.Runs[len(first.Runs)-1].ID)
		}
		if j, err := st.Queue().Get(ctx, r.JobID); err != nil || j.Key != fmt.Sprintf("run:%d", r.ID) || j.State != queue.Queued {
			t.Errorf("job of run %d = %+v, %v; want its own, queued", r.ID, j, err)
		}
	}
	evs, err := st.SubmissionEvents(ctx, next.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Errorf("the next submission's events: %+v; want only its own queued event", evs)
	}
}

// TestStore_LibraryReloadKeepsEdits: reloading the bundled library (every
// start) never reopens a leaderboard whose deadline an organiser set, and
// never overwrites a leaderboard an organiser's upload replaced.
func TestStore_LibraryReloadKeepsEdits(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := t.Context()
	lib := libSpecs(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	put := func(opt LoadOptions, specs ...LeaderboardSpec) []LoadOutcome {
		t.Helper()
		out, err := st.PutLeaderboards(ctx, specs, opt)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	put(LoadOptions{Source: SourceLibrary}, lib("a"), lib("b"))
	ended := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := st.ChangeLeaderboard(ctx, "a", api.LeaderboardChange{Deadline: &ended}); err != nil {
		t.Fatal(err)
	}
	upload := lib("b")
	upload.Description = "the organiser's own b"
	put(LoadOptions{Source: SourceUpload, Replace: true}, upload)
	out := put(LoadOptions{Source: SourceLibrary}, lib("a"), lib("b"))
	if out[0].Action != LoadUpdated || len(out[0].Kept) != 1 || out[1].Action != LoadKept {
		t.Errorf("the reload's outcomes: %+v; want a updated (its deadline kept), b kept", out)
	}
	a, err := st.Leaderboard(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Deadline.Equal(ended) {
		t.Errorf("a's deadline after the library's reload: %v; want the organiser's %v", a.Deadline, ended)
	}
	b, err := st.Leaderboard(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Description != "the organiser's own b" {
		t.Errorf("b after the library's reload: %q; want the organiser's upload", b.Description)
	}
	if out := put(LoadOptions{Source: SourceUpload, DryRun: true}, lib("a")); out[0].Action != LoadRefused {
		t.Errorf("an upload onto a taken name without Replace: %+v; want refused", out)
	}
}

// TestStore_RetargetGPUs: an organiser points a loaded leaderboard at the
// box's GPU types; reloads keep the choice, and bad lists are refused by
// name with nothing changed (issue 19: KernelBot's sets name B200, L4...).
func TestStore_RetargetGPUs(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := t.Context()
	lib := libSpecs(time.Time{})
	if _, err := st.PutLeaderboards(ctx, []LeaderboardSpec{lib("a")}, LoadOptions{Source: SourceLibrary}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		gpus []string
		want string
	}{
		{[]string{}, "at least one GPU type"},
		{[]string{"H 200"}, `GPU type "H 200"`},
		{[]string{"H200", strings.Repeat("x", 40)}, "1 to 32 characters"},
	} {
		if _, err := st.ChangeLeaderboard(ctx, "a", api.LeaderboardChange{GPUs: bad.gpus}); api.ErrorCode(err) != api.CodeInvalid || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("gpus %q: %v; want invalid, %q", bad.gpus, err, bad.want)
		}
	}
	if a, _ := st.Leaderboard(ctx, "a"); !slices.Equal(a.GPUs, []string{"cpu"}) {
		t.Fatalf("refused edits changed the GPU types to %v", a.GPUs)
	}
	if _, err := st.ChangeLeaderboard(ctx, "a", api.LeaderboardChange{GPUs: []string{"H200", "cpu"}}); err != nil {
		t.Fatal(err)
	}
	out, err := st.PutLeaderboards(ctx, []LeaderboardSpec{lib("a")}, LoadOptions{Source: SourceLibrary})
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.Leaderboard(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.GPUs, []string{"H200", "cpu"}) || !slices.Contains(out[0].Kept, "gpus") {
		t.Errorf("after a reload: gpus %v, kept %v; want the organiser's H200,cpu kept", a.GPUs, out[0].Kept)
	}
}

// libSpecs makes library specs with one deadline.
func libSpecs(deadline time.Time) func(string) LeaderboardSpec {
	return func(name string) LeaderboardSpec {
		return LeaderboardSpec{Name: name, Lang: "py", RankingBy: "geom", GPUs: []string{"cpu"}, ProblemDir: "/lib/" + name, Deadline: deadline}
	}
}

// PutLeaderboard creates or replaces one leaderboard from an upload
// (the tests' shorthand).
func (s *Store) PutLeaderboard(ctx context.Context, spec LeaderboardSpec) (created bool, err error) {
	out, err := s.PutLeaderboards(ctx, []LeaderboardSpec{spec}, LoadOptions{Source: SourceUpload, Replace: true})
	if err != nil {
		return false, err
	}
	return out[0].Action == LoadCreated, nil
}

// TestStore_RankingCarriesScoreErr: a run's score error reaches its
// submission and the ranking; a submission scored without one ranks with
// none (as every score stored before migration 0009).
func TestStore_RankingCarriesScoreErr(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := t.Context()
	lb, ann := leaderboardAndUser(t, st)
	bob, _, err := st.CreateUser(ctx, "bob", api.RoleContestant)
	if err != nil {
		t.Fatal(err)
	}
	scoredWithErr := func(u *User, score float64, serr *float64) {
		finished(t, st, lb, u, func(r api.Run) RunResult {
			if r.Secret { // the twin's own figures never rank
				other := 9 * score
				return RunResult{Status: api.StatusDone, Passed: true, Score: &other, ScoreErr: &other}
			}
			return RunResult{Status: api.StatusDone, Passed: true, Score: &score, ScoreErr: serr}
		})
	}
	e := 2e-6
	scoredWithErr(ann, 1e-4, &e)
	scoredWithErr(bob, 2e-4, nil)
	rows, err := st.Ranking(ctx, lb.ID, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].User != "ann" || rows[0].ScoreErr != e || rows[1].ScoreErr != 0 {
		t.Errorf("Ranking = %+v, want ann with score_err %g, then bob with none", rows, e)
	}
}

// A submission one of whose runs went without the sandbox is marked on
// the leaderboard; one the coordinator does not rank (Unranked) keeps its
// score and its reason for its owner and stays out of the ranking.
func TestStore_RankingUnsandboxed(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := t.Context()
	lb, ann := leaderboardAndUser(t, st)
	bob, _, err := st.CreateUser(ctx, "bob", api.RoleContestant)
	if err != nil {
		t.Fatal(err)
	}
	const why = "not ranked: ran without the sandbox"
	annSub := finished(t, st, lb, ann, func(r api.Run) RunResult {
		score := 2.0
		// Only the secret twin ran unsandboxed: the mark sticks all the same.
		return RunResult{Status: api.StatusDone, Passed: true, Score: &score, Unsandboxed: r.Secret}
	})
	// Bob's secret twin ends first: its reason, naming no node, gives way
	// to the public run's.
	bs, err := st.CreateSubmission(ctx, NewSubmission{Leaderboard: lb, User: bob, FileName: "s.py", Code: []byte("x = 2\n"),
		GPUType: "cpu", Mode: "leaderboard", Category: api.CategoryRanked, Secret: true})
	if err != nil {
		t.Fatal(err)
	}
	bobSub := bs.ID
	runs := slices.Clone(bs.Runs)
	slices.SortFunc(runs, func(a, b api.Run) int {
		if a.Secret == b.Secret {
			return 0
		}
		if a.Secret {
			return -1
		}
		return 1
	})
	for _, r := range runs {
		score := 1.0
		res := RunResult{Status: api.StatusDone, Passed: true, Score: &score, Unsandboxed: true, Unranked: why}
		if r.Secret {
			res.Unranked = "not ranked: the secret run's reason, which the public run's replaces"
		}
		if ok, err := st.StartRun(ctx, r.ID, "lease", "cpu:0"); err != nil || !ok {
			t.Fatalf("StartRun: %v, %v", ok, err)
		}
		if _, err := st.FinishRun(ctx, r.ID, "lease", res); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := st.Ranking(ctx, lb.ID, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Submission != annSub || !rows[0].Unsandboxed {
		t.Errorf("Ranking = %+v, want ann's submission %d alone, marked unsandboxed", rows, annSub)
	}
	sub, err := st.Submission(ctx, bobSub)
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Passed || sub.Score == nil || *sub.Score != 1 || !sub.Unsandboxed || sub.Unranked != why {
		t.Errorf("Submission(%d) = passed %v, score %v, unsandboxed %v, unranked %q; want passed, 1, true, %q",
			bobSub, sub.Passed, sub.Score, sub.Unsandboxed, sub.Unranked, why)
	}
}
