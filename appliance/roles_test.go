package appliance

import (
	"testing"

	"kernelbox/appliance/api"
)

// TestDaemon_Roles: a ban holds on every request, not only on submit; an
// organiser cannot ban an admin or another organiser, nobody bans
// themselves, and an invite for a role that does not exist is bad input.
func TestDaemon_Roles(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	ctx := t.Context()
	client := func(name string, role api.Role) *api.Client {
		t.Helper()
		cr, err := td.admin.AddUser(ctx, name, role)
		if err != nil {
			t.Fatalf("AddUser(%s): %v", name, err)
		}
		c, err := api.NewClient(td.server, cr.Token)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	org, org2 := client("olga", api.RoleOrganiser), client("oscar", api.RoleOrganiser)
	ann := client("ann", api.RoleContestant)
	forbidden := func(what string, err error) {
		t.Helper()
		if api.ErrorCode(err) != api.CodeForbidden {
			t.Errorf("%s = %v, want forbidden", what, err)
		}
	}

	me, err := td.admin.Me(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = org.Ban(ctx, me.Name, true)
	forbidden("an organiser bans the admin", err)
	_, err = org.Ban(ctx, "oscar", true)
	forbidden("an organiser bans another organiser", err)
	_, err = org.Ban(ctx, "olga", true)
	forbidden("an organiser bans itself", err)
	if u, err := org.Ban(ctx, "ann", true); err != nil || !u.Banned {
		t.Fatalf("an organiser bans a contestant = %+v, %v", u, err)
	}

	// A banned organiser keeps no staff power, and cannot lift its own ban.
	if u, err := td.admin.Ban(ctx, "oscar", true); err != nil || !u.Banned {
		t.Fatalf("the admin bans an organiser = %+v, %v", u, err)
	}
	_, err = org2.Ban(ctx, "oscar", false)
	forbidden("a banned organiser unbans itself", err)
	_, err = org2.Ban(ctx, "ann", false)
	forbidden("a banned organiser unbans a contestant", err)
	_, err = org2.Users(ctx)
	forbidden("a banned organiser lists users", err)
	_, err = org2.CreateInvite(ctx, api.Invite{})
	forbidden("a banned organiser makes an invite", err)
	// It can still read, and see that it is banned.
	if u, err := org2.Me(ctx); err != nil || !u.Banned {
		t.Errorf("a banned user's /api/me = %+v, %v; want it to read, banned", u, err)
	}
	_, err = ann.Submit(ctx, api.SubmitRequest{Leaderboard: "quick", Mode: "test", Code: []byte("def custom_kernel(xs):\n    return xs\n")})
	forbidden("a banned contestant submits", err)

	// An invite for an unknown role is bad input, not a server error.
	if _, err := org.CreateInvite(ctx, api.Invite{Role: "wizard"}); api.ErrorCode(err) != api.CodeInvalid {
		t.Errorf("an invite for role wizard = %v, want invalid", err)
	}
}
