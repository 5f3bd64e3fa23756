package appliance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/problems"
)

// loadProblemSet puts a problem set that lies under root on the leaderboards:
// at.File names a competition file inside root (KernelBot's format), or is
// empty when one problem (a task.yml) is at root or at.Dir below it, which
// becomes the leaderboard at.Name. A competition whose file is broken, or a single
// problem that does not load, changes nothing and is an error; a
// competition's problems that do not load are answered as invalid and
// the others load. Paths in messages are relative to root: an upload's
// lies in the server's data directory, which is nobody's business.
func (s *Service) loadProblemSet(ctx context.Context, root string, at api.ProblemLoad, opt store.LoadOptions) ([]api.LoadedProblem, error) {
	hide := func(msg string) string {
		return strings.ReplaceAll(strings.ReplaceAll(msg, root+string(filepath.Separator), ""), root, ".")
	}
	file, name := at.File, at.Name
	var entries []problems.CompetitionProblem
	var bad []api.LoadedProblem
	if file != "" {
		comp, err := problems.LoadCompetition(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return nil, api.Errorf(api.CodeInvalid, "%s", hide(err.Error()))
		}
		for _, b := range comp.Bad {
			bad = append(bad, api.LoadedProblem{Leaderboard: b.Name, Action: api.LoadInvalid, Error: hide(b.Err.Error())})
		}
		entries = comp.Problems
	} else {
		t, err := problems.LoadTask(filepath.Join(root, filepath.FromSlash(at.Dir)))
		if err != nil {
			return nil, api.Errorf(api.CodeInvalid, "%s", hide(err.Error()))
		}
		if name == "" {
			name = t.Name
		}
		entries = []problems.CompetitionProblem{{Name: name, GPUs: t.GPUs, Task: t}}
	}
	good := entries[:0:0]
	for _, p := range entries {
		if err := insideRoot(root, p.Task); err != nil {
			if file == "" {
				return nil, api.Errorf(api.CodeInvalid, "%s", hide(err.Error()))
			}
			bad = append(bad, api.LoadedProblem{Leaderboard: p.Name, Action: api.LoadInvalid, Error: hide(err.Error())})
			continue
		}
		good = append(good, p)
	}
	if len(at.GPUs) > 0 {
		for i := range good {
			good[i].GPUs = at.GPUs
		}
	}
	out, err := s.putProblems(ctx, good, opt)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 && opt.Source == store.SourceLibrary {
		s.log.Error("bundled problems that do not load", "problems", bad)
	}
	return append(out, bad...), nil
}

// putProblems puts problems that loaded on their leaderboards as opt says.
func (s *Service) putProblems(ctx context.Context, entries []problems.CompetitionProblem, opt store.LoadOptions) ([]api.LoadedProblem, error) {
	specs := make([]store.LeaderboardSpec, len(entries))
	for i, p := range entries {
		sha, err := p.Task.Fingerprint()
		if err != nil {
			return nil, api.Errorf(api.CodeInvalid, "%v", err)
		}
		gpus := p.GPUs
		if len(gpus) == 0 {
			gpus = p.Task.GPUs
		}
		if len(gpus) == 0 {
			gpus = s.gpuTypes() // "any": what this box has
		}
		if len(gpus) == 0 {
			gpus = []string{"cpu"}
		}
		specs[i] = store.LeaderboardSpec{Name: p.Name, Description: p.Task.Description,
			Lang: string(p.Task.Lang), RankingBy: string(p.Task.RankingBy), Deadline: p.Deadline, GPUs: gpus,
			ProblemDir: s.storedDir(p.Task.Dir), ProblemSHA: sha}
	}
	outcomes, err := s.store.PutLeaderboards(ctx, specs, opt)
	if err != nil {
		return nil, err
	}
	var out []api.LoadedProblem
	for i, o := range outcomes {
		lp := api.LoadedProblem{Leaderboard: o.Name, Action: o.Action, Created: o.Action == store.LoadCreated, GPUs: specs[i].GPUs,
			Deadline: specs[i].Deadline, Warnings: entries[i].Task.Warnings}
		if note := entries[i].Task.HarnessNote(); note != "" {
			lp.Warnings = append(slices.Clip(lp.Warnings), note)
		}
		switch o.Action {
		case store.LoadRefused:
			lp.Error = o.Why
		case store.LoadKept:
			lp.Warnings = append(lp.Warnings, o.Action+": "+o.Why)
		}
		for _, f := range o.Kept {
			lp.Warnings = append(lp.Warnings, "kept the "+f+" an organiser set by hand")
		}
		out = append(out, lp)
	}
	if !opt.DryRun {
		s.mu.Lock()
		s.tasks = map[string]*problems.Task{} // a reload replaces the cached tasks
		s.mu.Unlock()
	}
	return out, nil
}

// storedDir is how a problem directory is kept: relative to the data
// directory when inside it, so a data directory copied or restored
// elsewhere is whole; absolute otherwise.
func (s *Service) storedDir(dir string) string {
	if rel, err := filepath.Rel(s.cfg.DataDir, dir); err == nil && filepath.IsLocal(rel) {
		return filepath.ToSlash(rel)
	}
	return dir
}

// problemDir is where a leaderboard's problem lies now.
func (s *Service) problemDir(lb *store.Leaderboard) string {
	if filepath.IsAbs(lb.ProblemDir) {
		return lb.ProblemDir
	}
	return filepath.Join(s.cfg.DataDir, filepath.FromSlash(lb.ProblemDir))
}

// runTask is a leaderboard's task for a run, its files checked against
// the fingerprint recorded when it was loaded: a problem file changed on
// disk since (an edited eval.py would give contestants wrong verdicts)
// fails the run as the box's fault instead of being trusted.
func (s *Service) runTask(lb *store.Leaderboard) (*problems.Task, error) {
	t, err := s.task(lb)
	if err != nil {
		return nil, err
	}
	if lb.ProblemSHA == "" {
		return t, nil // loaded before fingerprints were kept; its next load records one
	}
	sha, err := t.Fingerprint()
	if err != nil {
		return nil, fmt.Errorf("leaderboard %s: %w", lb.Name, err)
	}
	if sha != lb.ProblemSHA {
		return nil, fmt.Errorf("leaderboard %s: %w: its files (in %s) changed since they were loaded; load the problem again", lb.Name, errProblemChanged, lb.ProblemDir)
	}
	return t, nil
}

// problemTrouble names the leaderboards whose problem directory is gone
// (every run of theirs would fail): for health.
func (s *Service) problemTrouble(ctx context.Context) []string {
	lbs, err := s.store.Leaderboards(ctx)
	if err != nil {
		return []string{fmt.Sprintf("cannot list the leaderboards: %v", err)}
	}
	var out []string
	for _, lb := range lbs {
		if _, err := os.Stat(filepath.Join(s.problemDir(lb), "task.yml")); err != nil {
			out = append(out, fmt.Sprintf("leaderboard %s: its problem is missing (%s): load it again", lb.Name, lb.ProblemDir))
		}
	}
	return out
}

// errProblemChanged is a problem whose files no longer match their load.
var errProblemChanged = errors.New("problem files changed")

// insideRoot refuses a problem whose directory or files lie outside the
// uploaded tree: an organiser's problem set must not copy the host's files
// into a contestant's run.
func insideRoot(root string, t *problems.Task) error {
	within := func(p string) bool {
		rel, err := filepath.Rel(root, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	if !within(t.Dir) {
		return api.Errorf(api.CodeInvalid, "problem %s: its directory is outside the problem set", t.Name)
	}
	for _, src := range t.Sources() {
		if !within(filepath.Join(t.Dir, filepath.FromSlash(src))) {
			return api.Errorf(api.CodeInvalid, "problem %s: %s comes from outside the problem set", t.Name, src)
		}
	}
	return nil
}

// loadLibrary exports the bundled problems under the data directory and
// loads their competition.
func (s *Service) loadLibrary(ctx context.Context, dir string) ([]api.LoadedProblem, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("load library: %w", err)
	}
	if err := problems.ExportLibrary(dir); err != nil {
		return nil, fmt.Errorf("load library: %w", err)
	}
	return s.loadProblemSet(ctx, dir, api.ProblemLoad{File: problems.LibraryCompetition}, store.LoadOptions{Source: store.SourceLibrary})
}
