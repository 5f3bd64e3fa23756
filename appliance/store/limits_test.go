package store

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"kernelbox/appliance/api"
)

// TestStore_LimitsHoldUnderConcurrency: submissions sent at once cannot
// all pass the cap on queued jobs or the rate limit: each is checked in
// the transaction that stores it (issue 18: checked before it, a cap of 20
// let 28 jobs in and 3 an hour let 4 through).
func TestStore_LimitsHoldUnderConcurrency(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		limits   Limits
		sent     int
		accepted int
	}{
		{"cap of 20 queued jobs", Limits{MaxQueued: 20}, 40, 20},
		{"3 an hour", Limits{Rate: 3, RateSince: time.Unix(0, 0)}, 12, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := newTestStore(t)
			lb, u := leaderboardAndUser(t, st)
			var wg sync.WaitGroup
			errs := make(chan error, c.sent)
			for i := range c.sent {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := st.CreateSubmission(t.Context(), NewSubmission{Leaderboard: lb, User: u, FileName: "s.py",
						Code: fmt.Appendf(nil, "x = %d\n", i), GPUType: "cpu", Mode: "test", Category: api.CategoryTest,
						Jobs: testJobs, Limits: c.limits})
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			accepted := 0
			for err := range errs {
				switch {
				case err == nil:
					accepted++
				case api.ErrorCode(err) != api.CodeExhausted:
					t.Errorf("refused with %v, want exhausted", err)
				}
			}
			if accepted != c.accepted {
				t.Errorf("accepted %d of %d sent at once, want %d", accepted, c.sent, c.accepted)
			}
			if d, err := st.Queue().Depth(t.Context()); err != nil || d["cpu"] != c.accepted {
				t.Errorf("queue depth = %v (%v), want %d", d, err, c.accepted)
			}
		})
	}
}

// TestStore_DeletingKeepsTheRateSpent: a submission its user deletes
// still counts against the hourly rate limit; deleting used to give its
// quota back, so submit-delete-submit had no limit (issue 19's
// self-delete).
func TestStore_DeletingKeepsTheRateSpent(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := t.Context()
	lb, u := leaderboardAndUser(t, st)
	lim := Limits{Rate: 2, RateSince: time.Date(2026, 12, 3, 11, 30, 0, 0, time.UTC)} // the test clock's now - 30 min
	submit := func(i int) error {
		_, err := st.CreateSubmission(ctx, NewSubmission{Leaderboard: lb, User: u, FileName: "s.py", Code: fmt.Appendf(nil, "x = %d\n", i),
			GPUType: "cpu", Mode: "test", Category: api.CategoryTest, Jobs: testJobs, Limits: lim})
		return err
	}
	for i := range 2 {
		if err := submit(i); err != nil {
			t.Fatal(err)
		}
		subs, err := st.Submissions(ctx, SubmissionFilter{UserID: u.ID})
		if err != nil || len(subs) == 0 {
			t.Fatalf("Submissions() = %v, %v", subs, err)
		}
		if _, err := st.DeleteSubmission(ctx, subs[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := submit(3); api.ErrorCode(err) != api.CodeExhausted {
		t.Errorf("a third submission in the hour after deleting two = %v; want the rate limit", err)
	}
}
