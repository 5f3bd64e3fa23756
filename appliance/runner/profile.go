package runner

import (
	"fmt"
	"os"
	"path/filepath"

	"kernelbox/problems"
)

// ProfileName is the name of run runID's kept .ncu-rep file, in the
// profiles directory.
func ProfileName(runID int64) string { return fmt.Sprintf("run-%d.ncu-rep", runID) }

// keepProfile copies a run's report out of its work directory, which dies
// with the run, into the data directory. A report over the cap is not
// kept, and the summary says so.
func (r *Runner) keepProfile(runID int64, p *problems.ProfileResult) (string, error) {
	if p == nil || p.File == "" {
		return "", nil
	}
	if p.Size > r.cfg.MaxReport {
		p.Summary += fmt.Sprintf("\n(the report, %d bytes, is over this box's %d-byte cap and was not kept)\n", p.Size, r.cfg.MaxReport)
		return "", nil
	}
	dir := r.cfg.ProfilesDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("keep profile of run %d: %w", runID, err)
	}
	name := ProfileName(runID)
	if err := problems.CopyFileAtomic(p.File, filepath.Join(dir, name)); err != nil {
		return "", fmt.Errorf("keep profile of run %d: %w", runID, err)
	}
	return name, nil
}
