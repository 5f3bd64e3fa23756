package appliance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// The service's organiser and admin operations: the rules of who may do
// what live here, not in the HTTP handlers, so that every front (the API
// today, the web page later) enforces the same ones. The caller has
// already checked that me is staff.

// Users lists every account.
// Canaries are each GPU type's last canary run, for the organisers' page.
func (s *Service) Canaries() []api.Canary { return s.canary.List() }

func (s *Service) Users(ctx context.Context) ([]api.User, error) {
	users, err := s.store.Users(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.User{}
	for _, u := range users {
		out = append(out, u.User)
	}
	return out, nil
}

// AddUser creates an account; only an admin creates organisers and admins.
func (s *Service) AddUser(ctx context.Context, me *store.User, req api.AddUserRequest) (api.Credentials, error) {
	if req.Role == "" {
		req.Role = string(api.RoleContestant)
	}
	role, err := api.ParseRole(req.Role)
	if err != nil {
		return api.Credentials{}, err
	}
	if role != api.RoleContestant && me.Role != api.RoleAdmin {
		return api.Credentials{}, api.Errorf(api.CodeForbidden, "only an admin can create %s users", role)
	}
	u, token, err := s.store.CreateUser(ctx, req.Name, role)
	if err != nil {
		return api.Credentials{}, err
	}
	return api.Credentials{User: u.User, Token: token}, nil
}

// SetBanned bans a user, or lifts the ban. Nobody bans or unbans
// themselves, and only an admin does so for organisers and admins: an
// organiser must not lock the box's admins out.
func (s *Service) SetBanned(ctx context.Context, me *store.User, name string, banned bool) (api.User, error) {
	target, err := s.store.User(ctx, name)
	if err != nil {
		return api.User{}, err
	}
	if target.ID == me.ID {
		return api.User{}, api.Errorf(api.CodeForbidden, "you cannot ban or unban yourself")
	}
	if target.Role != api.RoleContestant && me.Role != api.RoleAdmin {
		return api.User{}, api.Errorf(api.CodeForbidden, "only an admin can ban or unban %s users", target.Role)
	}
	if err := s.store.SetBanned(ctx, name, banned); err != nil {
		return api.User{}, err
	}
	u, err := s.store.User(ctx, name)
	if err != nil {
		return api.User{}, err
	}
	return u.User, nil
}

// IssueToken gives a user a new token; only an admin does so for staff.
func (s *Service) IssueToken(ctx context.Context, me *store.User, name string, revokeOthers bool) (api.Credentials, error) {
	target, err := s.store.User(ctx, name)
	if err != nil {
		return api.Credentials{}, err
	}
	if target.Role != api.RoleContestant && me.Role != api.RoleAdmin {
		return api.Credentials{}, api.Errorf(api.CodeForbidden, "only an admin can issue tokens for %s users", target.Role)
	}
	token, err := s.store.IssueToken(ctx, target.Name, revokeOthers)
	if err != nil {
		return api.Credentials{}, err
	}
	return api.Credentials{User: target.User, Token: token}, nil
}

// CreateInvite makes an invite code; only an admin invites organisers.
func (s *Service) CreateInvite(ctx context.Context, me *store.User, inv api.Invite) (api.InviteCode, error) {
	if inv.Role == api.RoleOrganiser && me.Role != api.RoleAdmin {
		return api.InviteCode{}, api.Errorf(api.CodeForbidden, "only an admin can invite organisers")
	}
	code, err := s.store.CreateInvite(ctx, inv)
	if err != nil {
		return api.InviteCode{}, err
	}
	return api.InviteCode{Invite: code, ID: store.InviteID(code), Role: inv.Role, Uses: max(inv.Uses, 1), Leaderboards: inv.Leaderboards}, nil
}

// Stats counts the box's activity since since (staff).
func (s *Service) Stats(ctx context.Context, since time.Time) (api.Stats, error) {
	return s.store.Stats(ctx, since)
}

// Invites lists the invites (staff).
func (s *Service) Invites(ctx context.Context) ([]api.InviteInfo, error) { return s.store.Invites(ctx) }

// RevokeInvite deletes an invite named by its code or id (staff).
func (s *Service) RevokeInvite(ctx context.Context, me *store.User, ref string) (api.Revoked, error) {
	id, err := s.store.RevokeInvite(ctx, ref)
	if err != nil {
		return api.Revoked{}, err
	}
	s.log.Info("invite revoked", logUser, me.Name, "invite", id)
	return api.Revoked{Revoked: id}, nil
}

// LoadProblems unpacks an uploaded problem set under the data directory
// and loads it as how says: each problem's leaderboard is created, or
// replaced when how.Replace, or refused when its name is taken; a problem
// that does not load is named and the others load. The unpacked set is
// removed unless a leaderboard now points into it (a dry run never).
func (s *Service) LoadProblems(ctx context.Context, me *store.User, archive io.Reader, how api.ProblemLoad) ([]api.LoadedProblem, error) {
	parent := filepath.Join(s.cfg.DataDir, "problems", "uploads")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	dir, err := api.UnpackProblemSet(archive, parent)
	if err != nil {
		return nil, err
	}
	for key, p := range map[string]string{"file": how.File, "dir": how.Dir} {
		if p != "" && (filepath.IsAbs(p) || strings.HasPrefix(filepath.Clean(p), "..")) {
			os.RemoveAll(dir)
			return nil, api.Errorf(api.CodeInvalid, "%s %q must be a path inside the uploaded set", key, p)
		}
	}
	for _, g := range how.GPUs {
		if err := store.CheckGPUType(g); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if how.File != "" && how.Dir != "" {
		os.RemoveAll(dir)
		return nil, api.Errorf(api.CodeInvalid, "give file (a competition) or dir (one problem), not both")
	}
	loaded, err := s.loadProblemSet(ctx, dir, how, store.LoadOptions{Source: store.SourceUpload, Replace: how.Replace, DryRun: how.DryRun})
	used := false
	for _, l := range loaded {
		used = used || api.Loads(l.Action)
	}
	if err != nil || how.DryRun || !used {
		os.RemoveAll(dir)
	}
	if err != nil {
		return nil, err
	}
	if !how.DryRun {
		s.log.Info("problem set loaded", logUser, me.Name, "dir", dir, "problems", len(loaded), "replace", how.Replace)
	}
	return loaded, nil
}

// SetHacked marks a submission hacked (out of the rankings) or clears it.
func (s *Service) SetHacked(ctx context.Context, id int64, hacked bool) (api.Submission, error) {
	if err := s.store.SetHacked(ctx, id, hacked); err != nil {
		return api.Submission{}, err
	}
	return s.staffSubmission(ctx, id)
}

// Review clears a flagged submission or confirms it as a cheat.
func (s *Service) Review(ctx context.Context, id int64, review string) (api.Submission, error) {
	if err := s.store.SetReview(ctx, id, review); err != nil {
		return api.Submission{}, err
	}
	return s.staffSubmission(ctx, id)
}

// staffSubmission is a submission as staff see it.
func (s *Service) staffSubmission(ctx context.Context, id int64) (api.Submission, error) {
	sub, err := s.store.Submission(ctx, id)
	if err != nil {
		return api.Submission{}, err
	}
	return sub.Submission, nil
}

// Flagged lists the submissions waiting for review.
func (s *Service) Flagged(ctx context.Context) ([]api.Submission, error) {
	subs, err := s.store.Flagged(ctx)
	if err != nil {
		return nil, err
	}
	return wireSubmissions(subs), nil
}

// DeleteMySubmission removes one of u's own submissions, as
// DeleteSubmission does (staff may remove anyone's): a contestant may take
// back a submission, and its place in the rankings with it.
func (s *Service) DeleteMySubmission(ctx context.Context, u *store.User, id int64) error {
	sub, err := s.visibleSubmission(ctx, u, id)
	if err != nil {
		return err
	}
	// A submission under review stays until the organisers decide: its
	// deletion would take the evidence with it.
	if !u.Role.Staff() && (sub.Hacked || sub.Review == api.ReviewFlagged || sub.Review == api.ReviewConfirmed) {
		return api.Errorf(api.CodeForbidden, "submission %d is flagged for review or marked hacked: only an organiser may delete it", id)
	}
	return s.deleteSubmission(ctx, sub)
}

// MySubmissions lists u's own submissions, newest first.
func (s *Service) MySubmissions(ctx context.Context, u *store.User, leaderboard string, limit int) ([]api.Submission, error) {
	return s.Submissions(ctx, u, SubmissionQuery{Leaderboard: leaderboard, Limit: limit})
}

// DeleteLeaderboard removes a loaded leaderboard; with force, its
// submissions go with it (their jobs cancelled, their profiles removed).
func (s *Service) DeleteLeaderboard(ctx context.Context, me *store.User, name string, force bool) (api.LeaderboardGone, error) {
	d, err := s.store.DeleteLeaderboard(ctx, name, force)
	if err != nil {
		return api.LeaderboardGone{}, err
	}
	for _, p := range d.Profiles {
		if err := os.Remove(filepath.Join(profilesDir(s.cfg.DataDir), filepath.Base(p))); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("remove profile", "leaderboard", name, "err", err)
		}
	}
	// The rows are gone: cancel every job, whatever one cancel says.
	var errs []error
	for _, j := range d.Jobs {
		if err := s.queue.Cancel(ctx, j); err != nil {
			errs = append(errs, fmt.Errorf("cancel job %d: %w", j, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return api.LeaderboardGone{}, fmt.Errorf("delete leaderboard %s: %w", name, err)
	}
	s.log.Info("leaderboard deleted", logUser, me.Name, "leaderboard", name, "submissions", d.Submissions)
	return api.LeaderboardGone{Leaderboard: name, Submissions: d.Submissions}, nil
}

// DeleteSubmission removes a submission, its runs and kept profiles, and
// cancels its jobs.
func (s *Service) DeleteSubmission(ctx context.Context, id int64) error {
	sub, err := s.store.Submission(ctx, id)
	if err != nil {
		return err
	}
	return s.deleteSubmission(ctx, sub)
}

func (s *Service) deleteSubmission(ctx context.Context, sub *store.Submission) error {
	jobs, err := s.store.DeleteSubmission(ctx, sub.ID)
	if err != nil {
		return err
	}
	s.removeProfiles(sub)
	for _, j := range jobs {
		if err := s.queue.Cancel(ctx, j); err != nil {
			return err
		}
	}
	return nil
}

// wireSubmissions are submissions as the API shows them.
func wireSubmissions(subs []*store.Submission) []api.Submission {
	out := []api.Submission{}
	for _, s := range subs {
		out = append(out, s.Submission)
	}
	return out
}
