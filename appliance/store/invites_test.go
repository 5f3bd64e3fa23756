package store

import (
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
)

// TestStore_InvitesListRevoke: staff see every invite by its id (never
// its code) with the uses it has left, and a revoked one admits nobody
// more while those it admitted stay (issue 19: popcorn's list-invites and
// revoke-invite).
func TestStore_InvitesListRevoke(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := t.Context()
	lb, _ := leaderboardAndUser(t, st)
	open, err := st.CreateInvite(ctx, api.Invite{Uses: 2})
	if err != nil {
		t.Fatal(err)
	}
	scoped, err := st.CreateInvite(ctx, api.Invite{Uses: 3, Leaderboards: []string{lb.Name}, Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Register(ctx, open, "cat"); err != nil {
		t.Fatal(err)
	}
	invs, err := st.Invites(ctx)
	if err != nil || len(invs) != 2 {
		t.Fatalf("Invites() = %+v, %v; want two", invs, err)
	}
	byID := map[string]api.InviteInfo{}
	for _, inv := range invs {
		byID[inv.ID] = inv
		if strings.Contains(inv.ID, "inv_") || len(inv.ID) != inviteIDLen {
			t.Errorf("invite id %q: want the hash's first %d characters, never the code", inv.ID, inviteIDLen)
		}
	}
	if got := byID[InviteID(open)]; got.UsesLeft != 1 || len(got.Leaderboards) != 0 || !got.Expires.IsZero() {
		t.Errorf("the open invite = %+v; want 1 use left, no leaderboards, no expiry", got)
	}
	if got := byID[InviteID(scoped)]; got.UsesLeft != 3 || len(got.Leaderboards) != 1 || got.Leaderboards[0] != lb.Name || got.Expires.IsZero() {
		t.Errorf("the scoped invite = %+v; want 3 uses, %s, an expiry", got, lb.Name)
	}

	for _, tc := range []struct{ ref, want string }{
		{"nope", "give the code or its 12-character id"},
		{"abcdefabcdef", "no invite abcdefabcdef"},
		{"inv_00", "no invite inv_00"},
	} {
		if _, err := st.RevokeInvite(ctx, tc.ref); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RevokeInvite(%q) = %v; want an error saying %q", tc.ref, err, tc.want)
		}
	}
	if id, err := st.RevokeInvite(ctx, InviteID(open)); err != nil || id != InviteID(open) {
		t.Fatalf("RevokeInvite(id) = %q, %v", id, err)
	}
	if _, err := st.RevokeInvite(ctx, scoped); err != nil {
		t.Fatalf("RevokeInvite(code) = %v", err)
	}
	if _, _, err := st.Register(ctx, open, "bob"); api.ErrorCode(err) != api.CodeUnauthorized {
		t.Errorf("Register with a revoked invite = %v; want unauthorized", err)
	}
	if u, err := st.User(ctx, "cat"); err != nil || u.Name != "cat" {
		t.Errorf("cat, admitted before the revoke = %v, %v; want her kept", u, err)
	}
	if invs, err := st.Invites(ctx); err != nil || len(invs) != 0 {
		t.Errorf("Invites() after revoking both = %+v, %v", invs, err)
	}
}

// TestStore_DeleteLeaderboard: a loaded leaderboard with submissions goes
// only when forced, and then with its submissions and ranking; a bundled
// one is refused (the library would bring it back); the log keeps both.
func TestStore_DeleteLeaderboard(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	ctx := t.Context()
	lb, u := leaderboardAndUser(t, st)
	sub := scored(t, st, lb, u, 2e-6, true)
	if _, err := st.PutLeaderboards(ctx, []LeaderboardSpec{{Name: "bundled", Lang: "py", RankingBy: "geom", GPUs: []string{"cpu"}, ProblemDir: "/y"}},
		LoadOptions{Source: SourceLibrary}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		force bool
		want  string
	}{
		{"nope", true, "no leaderboard nope"},
		{"bundled", true, "bundled with kernelbox"},
		{"lb", false, "has 1 submissions: --force deletes them"},
	} {
		if _, err := st.DeleteLeaderboard(ctx, tc.name, tc.force); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DeleteLeaderboard(%s, %v) = %v; want %q", tc.name, tc.force, err, tc.want)
		}
	}
	if _, err := st.Submission(ctx, sub); err != nil {
		t.Fatalf("a refused delete lost submission %d: %v", sub, err)
	}
	d, err := st.DeleteLeaderboard(ctx, "lb", true)
	if err != nil || d.Submissions != 1 {
		t.Fatalf("DeleteLeaderboard(lb, force) = %+v, %v; want 1 submission gone", d, err)
	}
	if _, err := st.Leaderboard(ctx, "lb"); api.ErrorCode(err) != api.CodeNotFound {
		t.Errorf("Leaderboard(lb) after delete = %v; want not found", err)
	}
	if _, err := st.Submission(ctx, sub); api.ErrorCode(err) != api.CodeNotFound {
		t.Errorf("Submission(%d) after its leaderboard went = %v; want not found", sub, err)
	}
	if _, err := st.Leaderboard(ctx, "bundled"); err != nil {
		t.Errorf("the bundled leaderboard = %v; want it kept", err)
	}
}
