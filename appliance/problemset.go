package appliance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/problems"
)

// loadProblemSet puts a problem set that lies under root on the leaderboards:
// file names a competition file inside root (KernelBot's format), or is
// empty when root itself is one problem (a task.yml), which becomes the
// leaderboard name. Nothing is changed unless every problem loads.
func (s *Service) loadProblemSet(ctx context.Context, root, file, name string, opt store.LoadOptions) ([]api.LoadedProblem, error) {
	var entries []problems.CompetitionProblem
	if file != "" {
		comp, err := problems.LoadCompetition(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return nil, api.Errorf(api.CodeInvalid, "%v", err)
		}
		entries = comp.Problems
	} else {
		t, err := problems.LoadTask(root)
		if err != nil {
			return nil, api.Errorf(api.CodeInvalid, "%v", err)
		}
		if name == "" {
			name = t.Name
		}
		entries = []problems.CompetitionProblem{{Name: name, GPUs: t.GPUs, Task: t}}
	}
	for _, p := range entries {
		if err := insideRoot(root, p.Task); err != nil {
			return nil, err
		}
	}
	specs := make([]store.LeaderboardSpec, len(entries))
	for i, p := range entries {
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
			Lang: string(p.Task.Lang), RankingBy: string(p.Task.RankingBy), Deadline: p.Deadline, GPUs: gpus, ProblemDir: p.Task.Dir}
	}
	outcomes, err := s.store.PutLeaderboards(ctx, specs, opt)
	if err != nil {
		return nil, err
	}
	var out []api.LoadedProblem
	for i, o := range outcomes {
		lp := api.LoadedProblem{Leaderboard: o.Name, Created: o.Action == store.LoadCreated, GPUs: specs[i].GPUs, Deadline: specs[i].Deadline,
			Warnings: entries[i].Task.Warnings}
		if o.Why != "" {
			lp.Warnings = append(lp.Warnings, o.Action+": "+o.Why)
		}
		for _, f := range o.Kept {
			lp.Warnings = append(lp.Warnings, "kept the "+f+" an organiser set by hand")
		}
		out = append(out, lp)
	}
	s.mu.Lock()
	s.tasks = map[string]*problems.Task{} // a reload replaces the cached tasks
	s.mu.Unlock()
	return out, nil
}

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
	for _, f := range t.Files {
		if f.Source == problems.SubmissionPlaceholder {
			continue
		}
		if !within(filepath.Join(t.Dir, filepath.FromSlash(f.Source))) {
			return api.Errorf(api.CodeInvalid, "problem %s: file %s comes from outside the problem set (%s)", t.Name, f.Name, f.Source)
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
	return s.loadProblemSet(ctx, dir, problems.LibraryCompetition, "", store.LoadOptions{Source: store.SourceLibrary})
}
