package appliance

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"kernelbox/appliance/api"
)

func (a *API) adminUsers(w http.ResponseWriter, r *http.Request) error {
	users, err := a.svc.store.Users(r.Context())
	if err != nil {
		return err
	}
	out := []api.User{}
	for _, u := range users {
		out = append(out, u.User)
	}
	return writeJSON(w, http.StatusOK, out)
}

func (a *API) adminAddUser(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name string `json:"name"`
		Role string `json:"role"`
	}
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	if req.Role == "" {
		req.Role = string(api.RoleContestant)
	}
	role, err := api.ParseRole(req.Role)
	if err != nil {
		return err
	}
	if me := userOf(r); role != api.RoleContestant && me.Role != api.RoleAdmin {
		return api.Errorf(api.CodeForbidden, "only an admin can create %s users", role)
	}
	u, token, err := a.svc.store.CreateUser(r.Context(), req.Name, role)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, api.Credentials{User: u.User, Token: token})
}

func (a *API) adminBan(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Banned bool `json:"banned"`
	}
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	if err := a.svc.store.SetBanned(r.Context(), r.PathValue("name"), req.Banned); err != nil {
		return err
	}
	u, err := a.svc.store.User(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, u.User)
}

func (a *API) adminToken(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		RevokeOthers bool `json:"revoke_others"`
	}
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	target, err := a.svc.store.User(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	if target.Role != api.RoleContestant && userOf(r).Role != api.RoleAdmin {
		return api.Errorf(api.CodeForbidden, "only an admin can issue tokens for %s users", target.Role)
	}
	token, err := a.svc.store.IssueToken(r.Context(), target.Name, req.RevokeOthers)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, api.Credentials{User: target.User, Token: token})
}

func (a *API) adminInvite(w http.ResponseWriter, r *http.Request) error {
	var inv api.Invite
	if err := decodeJSON(r, w, &inv); err != nil {
		return err
	}
	if inv.Role == api.RoleOrganiser && userOf(r).Role != api.RoleAdmin {
		return api.Errorf(api.CodeForbidden, "only an admin can invite organisers")
	}
	code, err := a.svc.store.CreateInvite(r.Context(), inv)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, api.InviteCode{Invite: code, Role: inv.Role, Uses: max(inv.Uses, 1), Leaderboards: inv.Leaderboards})
}

func (a *API) adminProblems(w http.ResponseWriter, r *http.Request) error {
	parent := filepath.Join(a.svc.cfg.DataDir, "problems", "uploads")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	dir, err := api.UnpackProblemSet(http.MaxBytesReader(w, r.Body, a.svc.cfg.MaxProblemBytes), parent)
	if err != nil {
		return err
	}
	file := r.URL.Query().Get("file")
	if file != "" && (filepath.IsAbs(file) || strings.HasPrefix(filepath.Clean(file), "..")) {
		os.RemoveAll(dir)
		return api.Errorf(api.CodeInvalid, "file %q must be a path inside the uploaded set", file)
	}
	loaded, err := a.svc.loadProblemSet(r.Context(), dir, file, r.URL.Query().Get("name"))
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	a.log.Info("problem set loaded", logUser, userOf(r).Name, "dir", dir, "leaderboards", len(loaded))
	return writeJSON(w, http.StatusOK, api.Loaded{Loaded: loaded})
}

func (a *API) adminLeaderboard(w http.ResponseWriter, r *http.Request) error {
	var ch api.LeaderboardChange
	if err := decodeJSON(r, w, &ch); err != nil {
		return err
	}
	lb, err := a.svc.store.ChangeLeaderboard(r.Context(), r.PathValue("name"), ch)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a.info(lb))
}

func (a *API) adminHacked(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var req struct {
		Hacked bool `json:"hacked"`
	}
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	if err := a.svc.store.SetHacked(r.Context(), id, req.Hacked); err != nil {
		return err
	}
	return a.writeSubmission(w, r, id)
}

// writeSubmission answers with a submission as staff see it, after a
// change to it.
func (a *API) writeSubmission(w http.ResponseWriter, r *http.Request, id int64) error {
	sub, err := a.svc.store.Submission(r.Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sub.Submission)
}

// wireSubmissions are submissions as the API shows them.
func wireSubmissions(subs []*Submission) []api.Submission {
	out := []api.Submission{}
	for _, s := range subs {
		out = append(out, s.Submission)
	}
	return out
}

func (a *API) adminFlagged(w http.ResponseWriter, r *http.Request) error {
	subs, err := a.svc.store.Flagged(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.Flagged{Submissions: wireSubmissions(subs)})
}

func (a *API) adminReview(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var req struct {
		Review string `json:"review"`
	}
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	if err := a.svc.store.SetReview(r.Context(), id, req.Review); err != nil {
		return err
	}
	return a.writeSubmission(w, r, id)
}

func (a *API) adminDelete(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	sub, err := a.svc.store.Submission(r.Context(), id)
	if err != nil {
		return err
	}
	jobs, err := a.svc.store.DeleteSubmission(r.Context(), id)
	if err != nil {
		return err
	}
	a.svc.removeProfiles(sub)
	for _, j := range jobs {
		if err := a.svc.queue.Cancel(r.Context(), j); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, api.Deleted{Deleted: id})
}

func (a *API) adminDrain(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = "drained by " + userOf(r).Name
	}
	if a.svc.drain == nil {
		return api.Errorf(api.CodeUnavailable, "the runner has not started")
	}
	if err := a.svc.drain(r.PathValue("id"), req.Reason); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a.svc.gpus())
}

func (a *API) adminUndrain(w http.ResponseWriter, r *http.Request) error {
	if a.svc.undrain == nil {
		return api.Errorf(api.CodeUnavailable, "the runner has not started")
	}
	if err := a.svc.undrain(r.PathValue("id")); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a.svc.gpus())
}
