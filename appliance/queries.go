package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/problems"
)

// The service's reads and account actions for every user: the handlers
// call these and never the store.

// Authenticate returns the user a token belongs to.
func (s *Service) Authenticate(ctx context.Context, token string) (*store.User, error) {
	return s.store.Authenticate(ctx, token)
}

// Register redeems an invite for a new account.
func (s *Service) Register(ctx context.Context, req api.RegisterRequest) (api.Credentials, error) {
	u, token, err := s.store.Register(ctx, req.Invite, req.Name)
	if err != nil {
		return api.Credentials{}, err
	}
	return api.Credentials{User: u.User, Token: token}, nil
}

// Join redeems an invite for u's membership of closed leaderboards.
func (s *Service) Join(ctx context.Context, u *store.User, invite string) (api.Joined, error) {
	names, err := s.store.Join(ctx, invite, u)
	return api.Joined{Leaderboards: names}, err
}

// Leaderboards lists the leaderboards u may see (a closed one only to its
// members and staff) with what this box makes of each.
func (s *Service) Leaderboards(ctx context.Context, u *store.User) ([]api.LeaderboardInfo, error) {
	lbs, err := s.store.Leaderboards(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.LeaderboardInfo{}
	for _, lb := range lbs {
		if err := s.mayRead(ctx, u, lb); api.ErrorCode(err) == api.CodeForbidden {
			continue
		} else if err != nil {
			return nil, err
		}
		out = append(out, s.info(lb))
	}
	return out, nil
}

// Leaderboard is one leaderboard with what this box makes of it.
func (s *Service) Leaderboard(ctx context.Context, u *store.User, name string) (api.LeaderboardInfo, error) {
	lb, err := s.readLeaderboard(ctx, u, name)
	if err != nil {
		return api.LeaderboardInfo{}, err
	}
	return s.info(lb), nil
}

// readLeaderboard finds a leaderboard u may read.
func (s *Service) readLeaderboard(ctx context.Context, u *store.User, name string) (*store.Leaderboard, error) {
	lb, err := s.lookupLeaderboard(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := s.mayRead(ctx, u, lb); err != nil {
		return nil, err
	}
	return lb, nil
}

// lookupLeaderboard finds a leaderboard by its name or, failing that, by
// its problem directory's name: KernelBot's solutions carry
// `#!POPCORN leaderboard vectoradd_py` where the competition file calls
// the leaderboard vectoradd_v2 (issue 19).
func (s *Service) lookupLeaderboard(ctx context.Context, name string) (*store.Leaderboard, error) {
	lb, err := s.store.Leaderboard(ctx, name)
	if api.ErrorCode(err) != api.CodeNotFound {
		return lb, err
	}
	all, lerr := s.store.Leaderboards(ctx)
	if lerr != nil {
		return nil, lerr
	}
	var found []*store.Leaderboard
	for _, l := range all {
		if answersTo(l, name) {
			found = append(found, l)
		}
	}
	switch len(found) {
	case 0:
		return nil, err
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, l := range found {
		names[i] = l.Name
	}
	return nil, api.Errorf(api.CodeInvalid, "%s is the problem of leaderboards %s: name one of them", name, strings.Join(names, ", "))
}

// answersTo says whether name names lb: its own name or its problem
// directory's.
func answersTo(lb *store.Leaderboard, name string) bool {
	return name == lb.Name || name == filepath.Base(lb.ProblemDir)
}

// mayRead says whether u may see lb at all: a closed leaderboard's
// problem, templates and ranking are its members' and staff's alone.
func (s *Service) mayRead(ctx context.Context, u *store.User, lb *store.Leaderboard) error {
	if lb.Visibility != api.VisibilityClosed || u.Role.Staff() {
		return nil
	}
	ok, err := s.store.IsMember(ctx, lb.ID, u.ID)
	if err != nil {
		return err
	}
	if !ok {
		return api.Errorf(api.CodeForbidden, "leaderboard %s is closed: it is open to invited users only (`kernelbox join CODE`)", lb.Name)
	}
	return nil
}

// ChangeLeaderboard applies an organiser's edit.
func (s *Service) ChangeLeaderboard(ctx context.Context, name string, ch api.LeaderboardChange) (api.LeaderboardInfo, error) {
	lb, err := s.store.ChangeLeaderboard(ctx, name, ch)
	if err != nil {
		return api.LeaderboardInfo{}, err
	}
	return s.info(lb), nil
}

func (s *Service) info(lb *store.Leaderboard) api.LeaderboardInfo {
	li := api.LeaderboardInfo{Leaderboard: lb.Leaderboard, State: "active", Available: []string{}}
	if lb.Ended(s.now()) {
		li.State = "ended"
	}
	served := s.gpuTypes()
	for _, g := range lb.GPUs {
		if slices.Contains(served, g) {
			li.Available = append(li.Available, g)
		}
	}
	if t, err := s.task(lb); err == nil {
		li.TimedBy = t.TimedBy()
		for k := range t.Templates {
			li.Templates = append(li.Templates, k)
		}
		sort.Strings(li.Templates)
		for _, c := range t.Tests {
			li.Tests = append(li.Tests, c.String())
		}
		for _, c := range t.Benchmarks {
			li.Benchmarks = append(li.Benchmarks, c.String())
		}
	}
	return li
}

// Ranking is a leaderboard's ranking on gpu, or on each of its GPU types
// when gpu is empty.
func (s *Service) Ranking(ctx context.Context, u *store.User, name, gpu string) (api.Ranking, error) {
	lb, err := s.readLeaderboard(ctx, u, name)
	if err != nil {
		return api.Ranking{}, err
	}
	gpus := lb.GPUs
	if gpu != "" {
		if !lb.OffersGPU(gpu) {
			return api.Ranking{}, api.Errorf(api.CodeInvalid, "leaderboard %s does not rank on %s (it ranks on %s)", lb.Name, gpu, strings.Join(lb.GPUs, ", "))
		}
		gpus = []string{gpu}
	}
	out := api.Ranking{Leaderboard: lb.Name, RankingBy: lb.RankingBy, Rankings: []api.GPURanking{}}
	if t, err := s.task(lb); err == nil {
		out.TimedBy = t.TimedBy()
	}
	for _, g := range gpus {
		rows, err := s.rankRows(ctx, lb, g)
		if err != nil {
			return api.Ranking{}, err
		}
		out.Rankings = append(out.Rankings, api.GPURanking{GPU: g, Rows: rows})
	}
	return out, nil
}

// Entry is a ranked entry's per-shape timings, for whoever may read the
// leaderboard: only a submission that ranks now (on its GPU type) is an
// entry, and only its public run's benchmark means are shown.
func (s *Service) Entry(ctx context.Context, u *store.User, name string, id int64) (api.Entry, error) {
	lb, err := s.readLeaderboard(ctx, u, name)
	if err != nil {
		return api.Entry{}, err
	}
	sub, err := s.store.Submission(ctx, id)
	if api.ErrorCode(err) == api.CodeNotFound || err == nil && sub.Leaderboard != lb.Name {
		return api.Entry{}, api.Errorf(api.CodeNotFound, "submission %d is not an entry of leaderboard %s", id, lb.Name)
	}
	if err != nil {
		return api.Entry{}, err
	}
	rows, err := s.rankRows(ctx, lb, sub.GPUType)
	if err != nil {
		return api.Entry{}, err
	}
	out := api.Entry{Leaderboard: lb.Name, GPU: sub.GPUType, Shapes: []api.EntryShape{}}
	i := slices.IndexFunc(rows, func(r api.RankRow) bool { return r.Submission == id })
	if i < 0 {
		return api.Entry{}, api.Errorf(api.CodeNotFound, "submission %d does not rank on %s now", id, lb.Name)
	}
	out.Row = rows[i]
	for _, run := range sub.Runs {
		if run.Secret || len(run.Report) == 0 {
			continue
		}
		var rep problems.Report
		if err := json.Unmarshal(run.Report, &rep); err != nil {
			return api.Entry{}, fmt.Errorf("entry %d: its report: %w", id, err)
		}
		for _, b := range rep.Benchmarks {
			out.Shapes = append(out.Shapes, api.EntryShape{Spec: b.Spec, MeanNs: b.Mean, ErrNs: b.Err})
		}
		break
	}
	return out, nil
}

// rankRows is a leaderboard's ranking on one GPU type, each row with its
// interval and tie: the one reading of a ranking.
func (s *Service) rankRows(ctx context.Context, lb *store.Leaderboard, gpu string) ([]api.RankRow, error) {
	rows, err := s.store.Ranking(ctx, lb.ID, gpu)
	if err != nil {
		return nil, err
	}
	markTies(rows, s.cfg.Measurement.TieFloor)
	return rows, nil
}

// markTies gives each row its score's interval (1.96 standard errors, at
// least floor of the score) and marks a row whose interval overlaps the
// one above it as tied with it: the daemon's one rule, which the CLI and
// the pages show as it says.
func markTies(rows []api.RankRow, floor float64) {
	for i := range rows {
		r := &rows[i]
		r.Interval = max(1.96*r.ScoreErr, floor*r.Score)
		if i > 0 {
			up := rows[i-1]
			r.Tie = r.Score-r.Interval <= up.Score+up.Interval
		}
	}
}

// SubmissionQuery is what a caller asks of the submission list: a staff
// member may ask for another user's (User) or everyone's (All).
type SubmissionQuery struct {
	Leaderboard, Status, User string
	All                       bool
	Limit                     int
}

// Submissions lists u's submissions, newest first, or as a staff member
// another user's or everyone's.
func (s *Service) Submissions(ctx context.Context, u *store.User, q SubmissionQuery) ([]api.Submission, error) {
	f := store.SubmissionFilter{UserID: u.ID, Leaderboard: q.Leaderboard, Status: q.Status, Limit: q.Limit}
	if u.Role.Staff() {
		switch {
		case q.All:
			f.UserID = 0
		case q.User != "":
			other, err := s.store.User(ctx, q.User)
			if err != nil {
				return nil, err
			}
			f.UserID = other.ID
		}
	}
	subs, err := s.store.Submissions(ctx, f)
	if err != nil {
		return nil, err
	}
	return wireSubmissions(subs), nil
}

// SubmissionView is a submission as u may see it (a secret run's details
// redacted for contestants), with its code when asked.
func (s *Service) SubmissionView(ctx context.Context, u *store.User, id int64, withCode bool) (api.SubmissionView, error) {
	sub, err := s.visibleSubmission(ctx, u, id)
	if err != nil {
		return api.SubmissionView{}, err
	}
	redact(sub, u)
	v := api.SubmissionView{Submission: sub.Submission}
	if withCode {
		code, err := s.store.Code(ctx, sub.SHA256)
		if err != nil {
			return api.SubmissionView{}, err
		}
		v.Code = string(code)
		if problems.IsArchive(sub.FileName) {
			v.Code = problems.ArchiveText(code, sub.FileName)
		}
	}
	return v, nil
}

// Changed returns a channel closed at the submission's next event, and
// the release of that watch.
func (s *Service) Changed(subID int64) (<-chan struct{}, func()) { return s.store.Changed(subID) }

// EventsPage reads the events after the cursor; waiting says that there
// are none yet and the submission is still open, so the caller may wait.
func (s *Service) EventsPage(ctx context.Context, id, after int64) (api.EventsPage, bool, error) {
	evs, err := s.store.SubmissionEvents(ctx, id, after)
	if err != nil {
		return api.EventsPage{}, false, err
	}
	status, err := s.store.SubmissionStatus(ctx, id)
	if err != nil {
		return api.EventsPage{}, false, err
	}
	done := api.Ended(status)
	page := api.EventsPage{Events: evs, Next: after, Done: done, Status: status}
	if len(evs) > 0 {
		page.Next = evs[len(evs)-1].ID
		// Hand over every event before saying done.
		page.Done = done && len(evs) < 500
	}
	return page, len(evs) == 0 && !done, nil
}

// Template is one of a leaderboard's templates: its file name and text.
func (s *Service) Template(ctx context.Context, u *store.User, leaderboard, key string) (string, []byte, error) {
	lb, err := s.readLeaderboard(ctx, u, leaderboard)
	if err != nil {
		return "", nil, err
	}
	t, err := s.task(lb)
	if err != nil {
		return "", nil, err
	}
	rel, ok := t.Templates[key]
	if !ok {
		var keys []string
		for k := range t.Templates {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return "", nil, api.Errorf(api.CodeNotFound, "leaderboard %s has no %q template (it has: %s)", lb.Name, key, strings.Join(keys, ", "))
	}
	data, err := os.ReadFile(filepath.Join(t.Dir, filepath.FromSlash(rel)))
	if err != nil {
		return "", nil, fmt.Errorf("read template: %w", err)
	}
	return filepath.Base(rel), data, nil
}
