package appliance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

// profilesDir holds the kept .ncu-rep files, one per run, named by the run.
func profilesDir(dataDir string) string { return filepath.Join(dataDir, "profiles") }

// setupProfiler decides what profile mode does on this box: ncu where the
// GPUs are NVIDIA, ncu is installed and the driver opens its counters to
// users; PyTorch's profiler table otherwise. It returns the line `kernelbox
// gpus` shows, so an organiser knows which one contestants get and why.
func (d *Daemon) setupProfiler() string {
	const fallback = "profile mode prints PyTorch's profiler table: "
	if d.inventory.Vendor != gpu.VendorNVIDIA {
		return "profile mode prints PyTorch's profiler table (ncu is for NVIDIA GPUs; none here)"
	}
	if d.cfg.Profiler.NCU == "off" {
		return fallback + "ncu is off in the config (profiler.ncu)"
	}
	if restricted, err := gpu.ProfilingRestricted(d.gpuRoot); restricted {
		why := "the driver keeps the GPU's counters to administrators (RmProfilingAdminOnly: 1)"
		if err != nil {
			why = err.Error()
		}
		d.log.Warn("ncu profiling is off", "why", why, "fix", gpu.ProfilingFix)
		return fallback + why + "; " + gpu.ProfilingFix
	}
	ncu, err := gpu.FindNCU(d.cfg.Profiler.NCU)
	if err != nil {
		d.log.Warn("ncu profiling is off", "why", err)
		return fallback + err.Error()
	}
	d.profiler = &problems.Profiler{NCU: ncu.Path, MaxKernels: d.cfg.Profiler.MaxKernels}
	d.profilerBinds = []sandbox.Bind{{Source: ncu.Dir}}
	d.log.Info("profile mode runs Nsight Compute", "ncu", ncu.Path, "max_kernels", d.cfg.Profiler.MaxKernels)
	return fmt.Sprintf("profile mode runs Nsight Compute (%s, at most %d kernels per run)", ncu.Path, d.cfg.Profiler.MaxKernels)
}

// profile serves a run's .ncu-rep to whoever may see the submission.
// ?run=N picks one run; without it, the submission's first run with one.
func (a *API) profile(w http.ResponseWriter, r *http.Request) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	var run int64
	if q := r.URL.Query().Get("run"); q != "" {
		if run, err = strconv.ParseInt(q, 10, 64); err != nil || run <= 0 {
			return api.Errorf(api.CodeInvalid, "run %q is not a positive number", q)
		}
	}
	f, err := a.svc.OpenProfile(r.Context(), userOf(r), id, run)
	if err != nil {
		return err
	}
	defer f.Close()
	return api.ServeProfile(w, r, id, f)
}

// OpenProfile opens the Nsight Compute report of run (0: the first run
// with one) of submission id, which u must be allowed to see.
func (s *Service) OpenProfile(ctx context.Context, u *store.User, id, run int64) (*os.File, error) {
	sub, err := s.visibleSubmission(ctx, u, id)
	if err != nil {
		return nil, err
	}
	var name string
	for _, r := range sub.Runs {
		if (run == 0 || r.ID == run) && r.Profile != "" {
			name = r.Profile
			break
		}
	}
	if name == "" {
		return nil, api.Errorf(api.CodeNotFound, "submission %d has no Nsight Compute report (profile mode on an NVIDIA GPU makes one)", id)
	}
	f, err := os.Open(filepath.Join(profilesDir(s.cfg.DataDir), filepath.Base(name)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, api.Errorf(api.CodeNotFound, "the report of submission %d is gone from the box", id)
	}
	return f, err
}

// removeProfiles deletes the reports of a deleted submission's runs.
func (s *Service) removeProfiles(sub *store.Submission) {
	for _, run := range sub.Runs {
		if run.Profile != "" {
			if err := os.Remove(filepath.Join(profilesDir(s.cfg.DataDir), filepath.Base(run.Profile))); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.log.Warn("remove profile", "run", run.ID, "err", err)
			}
		}
	}
}
