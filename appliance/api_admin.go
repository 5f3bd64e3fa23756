package appliance

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"kernelbox/appliance/api"
)

// The organiser and admin endpoints (staff only, checked by wrap): each
// decodes its request, calls the service and answers with its document.

func (a *API) adminUsers(w http.ResponseWriter, r *http.Request) error {
	users, err := a.svc.Users(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, users)
}

func (a *API) adminAddUser(w http.ResponseWriter, r *http.Request) error {
	var req api.AddUserRequest
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	cr, err := a.svc.AddUser(r.Context(), userOf(r), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, cr)
}

func (a *API) adminBan(w http.ResponseWriter, r *http.Request) error {
	var req api.BanRequest
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	u, err := a.svc.SetBanned(r.Context(), userOf(r), r.PathValue("name"), req.Banned)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, u)
}

func (a *API) adminToken(w http.ResponseWriter, r *http.Request) error {
	var req api.TokenRequest
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	cr, err := a.svc.IssueToken(r.Context(), userOf(r), r.PathValue("name"), req.RevokeOthers)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, cr)
}

func (a *API) adminInvite(w http.ResponseWriter, r *http.Request) error {
	var inv api.Invite
	if err := decodeJSON(r, w, &inv); err != nil {
		return err
	}
	code, err := a.svc.CreateInvite(r.Context(), userOf(r), inv)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, code)
}

func (a *API) adminDeleteLeaderboard(w http.ResponseWriter, r *http.Request) error {
	force := false
	if v := r.URL.Query().Get("force"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return api.Errorf(api.CodeInvalid, "query force=%q: want true or false", v)
		}
		force = b
	}
	gone, err := a.svc.DeleteLeaderboard(r.Context(), userOf(r), r.PathValue("name"), force)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, gone)
}

func (a *API) adminPause(w http.ResponseWriter, r *http.Request) error {
	var req api.DrainRequest
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	st, err := a.svc.Pause(req.Reason)
	if err != nil {
		return err
	}
	a.log.Warn("queue paused", logUser, userOf(r).Name, "why", req.Reason)
	return writeJSON(w, http.StatusOK, st)
}

func (a *API) adminResume(w http.ResponseWriter, r *http.Request) error {
	st, err := a.svc.Resume()
	if err != nil {
		return err
	}
	a.log.Info("queue resumed", logUser, userOf(r).Name)
	return writeJSON(w, http.StatusOK, st)
}

func (a *API) adminStats(w http.ResponseWriter, r *http.Request) error {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return api.Errorf(api.CodeInvalid, "since %q is not an RFC 3339 time", v)
		}
		since = t
	}
	st, err := a.svc.Stats(r.Context(), since)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

func (a *API) adminInvites(w http.ResponseWriter, r *http.Request) error {
	invs, err := a.svc.Invites(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, invs)
}

func (a *API) adminRevokeInvite(w http.ResponseWriter, r *http.Request) error {
	rev, err := a.svc.RevokeInvite(r.Context(), userOf(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, rev)
}

func (a *API) adminProblems(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	how := api.ProblemLoad{File: q.Get("file"), Dir: q.Get("dir"), Name: q.Get("name"), GPUs: splitList(q.Get("gpus"))}
	for key, to := range map[string]*bool{"replace": &how.Replace, "dry_run": &how.DryRun} {
		if v := q.Get(key); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return api.Errorf(api.CodeInvalid, "query %s=%q: want true or false", key, v)
			}
			*to = b
		}
	}
	// A problem set may be 64 MiB: it gets five body timeouts to arrive.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(5 * a.svc.cfg.BodyTimeout))
	loaded, err := a.svc.LoadProblems(r.Context(), userOf(r), http.MaxBytesReader(w, r.Body, a.svc.cfg.MaxProblemBytes), how)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.Loaded{Loaded: loaded, DryRun: how.DryRun})
}

// splitList reads a comma-separated query value.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (a *API) adminLeaderboard(w http.ResponseWriter, r *http.Request) error {
	var ch api.LeaderboardChange
	if err := decodeJSON(r, w, &ch); err != nil {
		return err
	}
	li, err := a.svc.ChangeLeaderboard(r.Context(), r.PathValue("name"), ch)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, li)
}

func (a *API) adminHacked(w http.ResponseWriter, r *http.Request) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	var req api.HackedRequest
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	sub, err := a.svc.SetHacked(r.Context(), id, req.Hacked)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sub)
}

func (a *API) adminFlagged(w http.ResponseWriter, r *http.Request) error {
	subs, err := a.svc.Flagged(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.Flagged{Submissions: subs})
}

func (a *API) adminReview(w http.ResponseWriter, r *http.Request) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	var req api.ReviewRequest
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	sub, err := a.svc.Review(r.Context(), id, req.Review)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sub)
}

func (a *API) adminDelete(w http.ResponseWriter, r *http.Request) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	if err := a.svc.DeleteSubmission(r.Context(), id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.Deleted{Deleted: id})
}

func (a *API) adminDrain(w http.ResponseWriter, r *http.Request) error {
	var req api.DrainRequest
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = "drained by " + userOf(r).Name
	}
	st, err := a.svc.Drain(r.PathValue("id"), req.Reason)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

func (a *API) adminUndrain(w http.ResponseWriter, r *http.Request) error {
	st, err := a.svc.Undrain(r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}
