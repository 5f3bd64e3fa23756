package api

import (
	"encoding/json"

	"kernelbox/problems"
)

// SubmitResult is the document `submit --json` prints once a submission
// has ended (and `submissions show --json` inside its result).
type SubmitResult struct {
	ID          int64                      `json:"id"`
	Leaderboard string                     `json:"leaderboard"`
	GPU         string                     `json:"gpu"`
	Mode        string                     `json:"mode"`
	Status      string                     `json:"status"`
	Passed      bool                       `json:"passed"`
	Reason      string                     `json:"reason,omitempty"`
	Score       *float64                   `json:"score"`
	Rank        int                        `json:"rank,omitempty"`
	Tests       []problems.TestResult      `json:"tests"`
	Benchmarks  []problems.BenchmarkResult `json:"benchmarks"`
	Secret      *Run                       `json:"secret,omitempty"`
	// Profile is profile mode's Nsight Compute summary; Download says
	// whether its report can be fetched (--profile FILE).
	Profile  *problems.ProfileResult `json:"profile,omitempty"`
	Download bool                    `json:"profile_download,omitempty"`
	Phases   []problems.Phase        `json:"-"`
	// Unranked is why a passing submission is kept out of the rankings
	// (it ran without the sandbox, and the box ranks no such run).
	Unranked string `json:"unranked,omitempty"`
}

// ResultOf gathers the public run's tests and benchmarks.
func ResultOf(sub *Submission) SubmitResult {
	res := SubmitResult{ID: sub.ID, Leaderboard: sub.Leaderboard, GPU: sub.GPUType, Mode: sub.Mode, Status: sub.Status,
		Passed: sub.Passed, Reason: sub.Reason, Score: sub.Score, Unranked: sub.Unranked, Tests: []problems.TestResult{}, Benchmarks: []problems.BenchmarkResult{}}
	for i := range sub.Runs {
		r := &sub.Runs[i]
		if r.Secret {
			res.Secret = r
			continue
		}
		var rep problems.Report
		if len(r.Report) > 0 && json.Unmarshal(r.Report, &rep) == nil {
			res.Tests, res.Benchmarks, res.Phases, res.Profile = rep.Tests, rep.Benchmarks, rep.Phases, rep.Profile
		}
		res.Download = res.Download || r.Profile != ""
		if res.Reason == "" {
			res.Reason = r.Reason
		}
	}
	return res
}
