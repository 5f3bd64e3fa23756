package popcorn

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

// The bodies below are KernelBot's, as far as popcorn-cli reads them
// (docs/interop/popcorn-protocol.md §3-4); fields it ignores are left out.

// leaderboard is an element of GET /leaderboards: popcorn requires name,
// a string description and a task object of every element.
type leaderboard struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Deadline    *time.Time     `json:"deadline"`
	Task        map[string]any `json:"task"`
	GPUTypes    []string       `json:"gpu_types"`
	Visibility  string         `json:"visibility"`
}

func wireLeaderboard(lb api.LeaderboardInfo) leaderboard {
	out := leaderboard{Name: lb.Name, Description: lb.Description, GPUTypes: nonNil(lb.Available), Visibility: string(lb.Visibility),
		Task: map[string]any{"lang": lb.Lang, "ranking_by": lb.RankingBy}}
	if !lb.Deadline.IsZero() {
		out.Deadline = &lb.Deadline
	}
	return out
}

type accepted struct {
	Status      string       `json:"status"`
	Details     details      `json:"details"`
	RunnerQueue *runnerQueue `json:"runner_queue"`
}

type details struct {
	ID int64 `json:"id"`
}

type runnerQueue struct {
	Runner      string `json:"runner"`
	GPU         string `json:"gpu"`
	QueuedJobs  int    `json:"queued_jobs"`
	RunningJobs int    `json:"running_jobs"`
}

// listed is an element of GET /user/submissions.
type listed struct {
	ID          int64       `json:"id"`
	Leaderboard string      `json:"leaderboard_name"`
	FileName    string      `json:"file_name"`
	Time        string      `json:"submission_time"`
	Done        bool        `json:"done"`
	Runs        []listedRun `json:"runs"`
}

type listedRun struct {
	GPU   string   `json:"gpu_type"`
	Score *float64 `json:"score"`
}

func wireListed(s api.Submission) listed {
	out := listed{ID: s.ID, Leaderboard: s.Leaderboard, FileName: s.FileName, Time: s.Created.UTC().Format(time.RFC3339),
		Done: api.Ended(s.Status), Runs: []listedRun{{GPU: s.GPUType, Score: s.Score}}}
	return out
}

// submission is GET /user/submissions/{id}, which popcorn polls: job's
// status ends the wait (failed, timed_out and hacked with job.error as
// the reason) and done with anything else is success.
type submission struct {
	ID          int64        `json:"id"`
	Leaderboard string       `json:"leaderboard_name"`
	FileName    string       `json:"file_name"`
	UserID      string       `json:"user_id"`
	Time        string       `json:"submission_time"`
	Done        bool         `json:"done"`
	Code        string       `json:"code"`
	Runs        []run        `json:"runs"`
	Job         job          `json:"job"`
	RunnerQueue *runnerQueue `json:"runner_queue"`
}

type run struct {
	Start  *string  `json:"start_time"`
	End    *string  `json:"end_time"`
	Mode   string   `json:"mode"`
	Secret bool     `json:"secret"`
	Runner string   `json:"runner"`
	Score  *float64 `json:"score"`
	Passed bool     `json:"passed"`
}

type job struct {
	Status string  `json:"status"`
	Error  *string `json:"error"`
}

func stamp(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

func wireSubmission(v api.SubmissionView) submission {
	out := submission{ID: v.ID, Leaderboard: v.Leaderboard, FileName: v.FileName, UserID: v.User,
		Time: v.Created.UTC().Format(time.RFC3339), Done: api.Ended(v.Status), Code: v.Code, Runs: []run{}, Job: jobOf(v.Submission)}
	for _, r := range v.Runs {
		out.Runs = append(out.Runs, run{Start: stamp(r.Started), End: stamp(r.Finished), Mode: r.Mode, Secret: r.Secret,
			Runner: r.GPUType, Score: r.Score, Passed: r.Passed})
	}
	return out
}

// jobOf is KernelBot's job status for a submission. A submission that
// ran but did not pass ends failed with its reason, in every mode:
// popcorn then prints why, where KernelBot's succeeded would show a
// bare "passed": false.
func jobOf(s api.Submission) job {
	reason := func(why string) *string {
		if why == "" {
			why = "no reason was recorded"
		}
		return &why
	}
	switch {
	case s.Hacked:
		return job{Status: "hacked", Error: reason("an organiser marked it as a cheat; it is out of the rankings")}
	case s.Status == api.StatusQueued:
		return job{Status: "pending"}
	case s.Status == api.StatusRunning:
		return job{Status: "running"}
	case s.Status == api.StatusDone && s.Passed:
		return job{Status: "succeeded"}
	case s.Status == api.StatusCancelled:
		return job{Status: "failed", Error: reason("cancelled")}
	default:
		return job{Status: "failed", Error: reason(s.Reason)}
	}
}

// fullResult is one run in the stream's result event (KernelBot's
// FullResult): the runs map holds one entry, keyed by the mode.
type fullResult struct {
	Success bool                  `json:"success"`
	Error   string                `json:"error"`
	System  map[string]any        `json:"system"`
	Runs    map[string]evalResult `json:"runs"`
}

type evalResult struct {
	Start       *string        `json:"start"`
	End         *string        `json:"end"`
	Compilation any            `json:"compilation"`
	Run         *runResult     `json:"run"`
	Profile     *profileResult `json:"profile"`
}

type runResult struct {
	Success  bool           `json:"success"`
	Passed   bool           `json:"passed"`
	Command  string         `json:"command"`
	Stdout   string         `json:"stdout"`
	Stderr   string         `json:"stderr"`
	ExitCode int            `json:"exit_code"`
	Duration float64        `json:"duration"`
	Result   map[string]any `json:"result"`
}

type profileResult struct {
	Profiler    string  `json:"profiler"`
	Trace       string  `json:"trace"`
	DownloadURL *string `json:"download_url"`
}

// wireResult is the result event's payload for a finished submission;
// profileURL is where its Nsight Compute report downloads (kernelbox's
// API, with a kernelbox token).
func wireResult(v api.SubmissionView, profileURL string) map[string]any {
	results := []fullResult{}
	var reports []string
	for _, r := range v.Runs {
		var rep problems.Report
		_ = json.Unmarshal(r.Report, &rep) // a run that never reported has none
		key := r.Mode
		rr := &runResult{Success: r.Status == api.StatusDone, Passed: r.Passed, Command: "kernelbox " + r.Mode,
			Duration: r.Finished.Sub(r.Started).Seconds(), Result: resultLines(rep)}
		if r.Finished.IsZero() || r.Started.IsZero() {
			rr.Duration = 0
		}
		ev := evalResult{Start: stamp(r.Started), End: stamp(r.Finished), Run: rr}
		if r.Mode == "profile" {
			key = "profile.0"
			ev.Profile = &profileResult{Profiler: "Nsight-Compute"}
			if r.Profile != "" {
				ev.Profile.DownloadURL = &profileURL
			}
		}
		results = append(results, fullResult{Success: r.Passed, Error: r.Reason,
			System: map[string]any{"gpu": r.GPUType, "device_count": 1, "runtime": rep.Device, "hostname": "kernelbox"},
			Runs:   map[string]evalResult{key: ev}})
		reports = append(reports, report(r, rep))
	}
	return map[string]any{"status": "success", "results": results, "reports": nonNil(reports)}
}

// resultLines are the run's results as its harness's key: value lines
// (KernelBot's run.result): counts as numbers, so that popcorn decodes a
// profile's reports.
func resultLines(rep problems.Report) map[string]any {
	out := map[string]any{}
	if rep.Passed {
		out["check"] = "pass"
	} else {
		out["check"] = "fail"
	}
	if len(rep.Tests) > 0 {
		out["test-count"] = len(rep.Tests)
	}
	for _, t := range rep.Tests {
		p := fmt.Sprintf("test.%d.", t.Index)
		out[p+"spec"], out[p+"status"] = t.Spec, t.Status
		if t.Error != "" {
			out[p+"error"] = t.Error
		}
	}
	if len(rep.Benchmarks) > 0 {
		out["benchmark-count"] = len(rep.Benchmarks)
	}
	for _, b := range rep.Benchmarks {
		p := fmt.Sprintf("benchmark.%d.", b.Index)
		out[p+"spec"] = b.Spec
		if b.Report != "" {
			out[p+"report"] = b.Report
		}
		if b.Status == "fail" {
			out[p+"status"], out[p+"error"] = b.Status, b.Error
			continue
		}
		for k, x := range map[string]float64{"runs": float64(b.Runs), "mean": b.Mean, "std": b.Std, "err": b.Err, "best": b.Best, "worst": b.Worst} {
			out[p+k] = fmt.Sprint(x)
		}
	}
	return out
}

// report is the run's summary in words, which popcorn prints.
func report(r api.Run, rep problems.Report) string {
	var b strings.Builder
	verdict := "✅ passed"
	if !r.Passed {
		verdict = "❌ failed"
	}
	secret := ""
	if r.Secret {
		secret = " (secret run)"
	}
	fmt.Fprintf(&b, "**%s on kernelbox %s**%s, %s mode", r.GPUType, verdict, secret, r.Mode)
	if r.Reason != "" {
		fmt.Fprintf(&b, "\n> %s", r.Reason)
	}
	for _, t := range rep.Tests {
		fmt.Fprintf(&b, "\n- test %d (%s): %s", t.Index, t.Spec, t.Status)
	}
	for _, bm := range rep.Benchmarks {
		fmt.Fprintf(&b, "\n- benchmark %d (%s): %s ± %s", bm.Index, bm.Spec, problems.FormatNS(bm.Mean), problems.FormatNS(bm.Err))
	}
	if r.Score != nil {
		fmt.Fprintf(&b, "\nscore: %s", problems.FormatNS(*r.Score*1e9))
	}
	return b.String()
}
