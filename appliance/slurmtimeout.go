package appliance

import (
	"fmt"
	"time"

	"kernelbox/appliance/runner"
	"kernelbox/problems"
)

// A job that runs past its Slurm time limit (slurm.time_limit, sbatch
// --time) is stopped by Slurm, and squeue says TIMEOUT. The limit bounds
// the run, as a problem's own timeouts bound a phase: going past it is
// the submission's verdict, "timed out", not the box's failure, and it is
// not tried again (three more hours of a kernel that never ends help no
// one). A node that hangs by itself is no different to the coordinator;
// the node's own log (slurm.output) tells them apart.

// jobTimedOut is wait's word for a job Slurm stopped at its time limit.
type jobTimedOut struct{ job, node string }

func (e *jobTimedOut) Error() string {
	return fmt.Sprintf("job %s in Slurm went past its time limit on %s", e.job, nodeOrNone(e.node))
}

// timedOut is the execution of a run whose job went past its time limit:
// the contestant's verdict, with the limit.
func (s *slurm) timedOut(mode string, e *jobTimedOut) *runner.Execution {
	rep := &problems.Report{Mode: problems.Mode(mode), Passed: false,
		Reason: fmt.Sprintf("timed out: the run went past the Slurm time limit of %s (slurm.time_limit)", fmtLimit(s.cfg.TimeLimit)),
		Tests:  []problems.TestResult{}, Benchmarks: []problems.BenchmarkResult{}}
	info := map[string]any{logSlurmJob: e.job, "slurm_state": "TIMEOUT"}
	if e.node != "" {
		info["node"] = e.node
	}
	return &runner.Execution{Report: rep, Info: info}
}

// fmtLimit writes a time limit as people do: 1h, 90m, 1h30m.
func fmtLimit(d time.Duration) string {
	d = d.Round(time.Minute)
	h, m := d/time.Hour, (d%time.Hour)/time.Minute
	switch {
	case h > 0 && m > 0:
		return fmt.Sprintf("%dh%dm", h, m)
	case h > 0:
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dm", m)
}
