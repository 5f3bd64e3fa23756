package web

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// StaffService is what the organisers' page needs of the daemon, beside
// Service: the calls behind `kernelbox admin ...`.
type StaffService interface {
	Flagged(ctx context.Context) ([]api.Submission, error)
	Review(ctx context.Context, id int64, review string) (api.Submission, error)
	ChangeLeaderboard(ctx context.Context, name string, ch api.LeaderboardChange) (api.LeaderboardInfo, error)
	CreateInvite(ctx context.Context, me *store.User, inv api.Invite) (api.InviteCode, error)
	Invites(ctx context.Context) ([]api.InviteInfo, error)
	RevokeInvite(ctx context.Context, me *store.User, ref string) (api.Revoked, error)
	Users(ctx context.Context) ([]api.User, error)
	SetBanned(ctx context.Context, me *store.User, name string, banned bool) (api.User, error)
	// Canaries are each GPU type's last canary run: a failed one means
	// every submission of that type fails, whatever it is.
	Canaries() []api.Canary
}

type adminPage struct {
	// Canaries that failed or have not run yet: the page's banner.
	Canaries     []api.Canary
	Flagged      []api.Submission
	Leaderboards []api.LeaderboardInfo
	Invites      []api.InviteInfo
	Users        []api.User
	// NewInvite is the code just made: shown this once.
	NewInvite *api.InviteCode
	Done      string
}

// staffOnly refuses a contestant, as the API's staff routes do.
func staffOnly(u *store.User) error {
	if u.Banned {
		// As on the API: a banned organiser uses no staff power, reading
		// included, or it could lift its own ban.
		return api.Errorf(api.CodeForbidden, "user %s is banned: it can read, not act; ask an organiser", u.Name)
	}
	if !u.Role.Staff() {
		return api.Errorf(api.CodeForbidden, "%s is a %s; this page is for organisers and admins", u.Name, u.Role)
	}
	return nil
}

func (h *Handler) admin(w http.ResponseWriter, r *http.Request, u *store.User) error {
	return h.adminRender(w, r, u, adminPage{Done: r.URL.Query().Get("done")})
}

func (h *Handler) adminRender(w http.ResponseWriter, r *http.Request, u *store.User, p adminPage) error {
	if err := staffOnly(u); err != nil {
		return err
	}
	ctx := r.Context()
	for _, c := range h.staff.Canaries() {
		if !c.OK {
			p.Canaries = append(p.Canaries, c)
		}
	}
	var err error
	if p.Flagged, err = h.staff.Flagged(ctx); err != nil {
		return err
	}
	if p.Leaderboards, err = h.svc.Leaderboards(ctx, u); err != nil {
		return err
	}
	if p.Invites, err = h.staff.Invites(ctx); err != nil {
		return err
	}
	if p.Users, err = h.staff.Users(ctx); err != nil {
		return err
	}
	return h.render(w, r, u, http.StatusOK, "admin", "Organisers", p)
}

// adminDone goes back to the page with what was done, so a reload does
// not send the form again.
func adminDone(w http.ResponseWriter, r *http.Request, done string) error {
	http.Redirect(w, r, "/admin?done="+url.QueryEscape(done), http.StatusSeeOther)
	return nil
}

func (h *Handler) adminReview(w http.ResponseWriter, r *http.Request, u *store.User) error {
	if err := staffOnly(u); err != nil {
		return err
	}
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	review := r.PostFormValue("review")
	if _, err := h.staff.Review(r.Context(), id, review); err != nil {
		return err
	}
	return adminDone(w, r, "submission "+strconv.FormatInt(id, 10)+" "+review)
}

func (h *Handler) adminLeaderboard(w http.ResponseWriter, r *http.Request, u *store.User) error {
	if err := staffOnly(u); err != nil {
		return err
	}
	name := r.PathValue("name")
	var ch api.LeaderboardChange
	if v := r.PostFormValue("visibility"); v != "" {
		vis := api.Visibility(v)
		ch.Visibility = &vis
	}
	if d, ok := r.PostForm["deadline"]; ok {
		var at time.Time // empty: no deadline
		if s := strings.TrimSpace(d[0]); s != "" {
			t, err := time.Parse("2006-01-02T15:04", s)
			if err != nil {
				return api.Errorf(api.CodeInvalid, "deadline %q: want a date and time like 2026-12-31T18:00 (UTC)", s)
			}
			at = t.UTC()
		}
		ch.Deadline = &at
	}
	if _, err := h.staff.ChangeLeaderboard(r.Context(), name, ch); err != nil {
		return err
	}
	return adminDone(w, r, "leaderboard "+name+" changed")
}

func (h *Handler) adminInvite(w http.ResponseWriter, r *http.Request, u *store.User) error {
	if err := staffOnly(u); err != nil {
		return err
	}
	role, err := api.ParseRole(r.PostFormValue("role"))
	if err != nil {
		return err
	}
	uses, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("uses")))
	if err != nil {
		return api.Errorf(api.CodeInvalid, "uses %q is not a number", r.PostFormValue("uses"))
	}
	lbs := strings.FieldsFunc(r.PostFormValue("leaderboards"), func(c rune) bool { return c == ',' || c == ' ' })
	inv := api.Invite{Role: role, Uses: uses, Leaderboards: append([]string{}, lbs...)}
	code, err := h.staff.CreateInvite(r.Context(), u, inv)
	if err != nil {
		return err
	}
	// Rendered here, not redirected: the code is shown this once.
	return h.adminRender(w, r, u, adminPage{NewInvite: &code})
}

func (h *Handler) adminRevoke(w http.ResponseWriter, r *http.Request, u *store.User) error {
	if err := staffOnly(u); err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := h.staff.RevokeInvite(r.Context(), u, id); err != nil {
		return err
	}
	return adminDone(w, r, "invite "+id+" revoked")
}

func (h *Handler) adminBan(w http.ResponseWriter, r *http.Request, u *store.User) error {
	if err := staffOnly(u); err != nil {
		return err
	}
	name := r.PathValue("name")
	banned := r.PostFormValue("banned") == "true"
	if _, err := h.staff.SetBanned(r.Context(), u, name, banned); err != nil {
		return err
	}
	what := "unbanned"
	if banned {
		what = "banned"
	}
	return adminDone(w, r, name+" "+what)
}
