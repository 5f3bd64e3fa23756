package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"kernelbox/problems"
)

// The node protocol: with the slurm executor, a Slurm job runs
// `kernelbox node run-job` on a node, which fetches its run from the
// coordinator, runs it in its own sandbox and reports back. Each request
// carries the run's job token (a secret of this one attempt, given to the
// Slurm job in its batch script), never a user's token.

// NodeJob is one run as a node gets it: GET /api/node/runs/{run}.
type NodeJob struct {
	Run        int64  `json:"run"`
	Submission int64  `json:"submission"`
	User       string `json:"user"`
	// UserID keys the node's compile cache for the submitter.
	UserID   int64  `json:"user_id"`
	Mode     string `json:"mode"`
	Secret   bool   `json:"secret,omitempty"`
	Seed     *int64 `json:"seed,omitempty"`
	GPUType  string `json:"gpu_type"`
	GPUs     int    `json:"gpus"`
	FileName string `json:"file_name"`
	Code     []byte `json:"code"`
	// Leaderboard names the problem; Problem holds its task.yml and
	// sources by slash path, and ProblemSHA their fingerprint.
	Leaderboard string            `json:"leaderboard"`
	Problem     map[string][]byte `json:"problem"`
	ProblemSHA  string            `json:"problem_sha"`
	// MaxResult, when set, is the most bytes the coordinator takes of a
	// report through the shared directory; the API says so with a 413.
	MaxResult int64 `json:"max_result,omitempty"`
	// CheckEvery, when set, is how often the node asks whether its
	// attempt still stands (GET .../attempt, or its directory there): one
	// the coordinator gave up (a NODE_FAIL while the node was only cut
	// off) stops, rather than run on to a report no one takes.
	CheckEvery time.Duration `json:"check_every,omitempty"`
}

// NodeEvent is a run's progress as a node reports it: POST
// /api/node/runs/{run}/events. One of its fields is set.
type NodeEvent struct {
	Test  *RunTest  `json:"test,omitempty"`
	Phase *RunPhase `json:"phase,omitempty"`
}

// NodeResult is what a node reports at a run's end: POST
// /api/node/runs/{run}/result.
type NodeResult struct {
	// Error is set when the node could not carry the run out (no sandbox,
	// the wrong GPU, a harness that could not start): the box's failure,
	// which the coordinator retries; the fields below are then empty.
	Error  string           `json:"error,omitempty"`
	Report *problems.Report `json:"report,omitempty"`
	// Wall is the run's time from the gate to the result.
	Wall time.Duration `json:"wall_ns"`
	// Timed runs were gated and sampled on a measured GPU.
	Timed bool `json:"timed,omitempty"`
	// Telemetry is the GPUs' readings (the node's gpu types, kept as JSON
	// here so that a client build needs no GPU library).
	Telemetry json.RawMessage `json:"telemetry,omitempty"`
	// Profile is the kept Nsight Compute report, when there is one.
	Profile []byte `json:"profile,omitempty"`
	// System is what the node says of itself (host, Python, GPU, driver).
	System map[string]any `json:"system,omitempty"`
}

// NodeJob fetches the run this client's job token is for.
func (c *Client) NodeJob(ctx context.Context, run int64) (*NodeJob, error) {
	var j NodeJob
	return &j, c.getJSON(ctx, nodePath(run, ""), nil, &j)
}

// NodeAttempt says whether the node's attempt at run still stands: nil
// while it does, an unauthorized error once the coordinator gave it up.
func (c *Client) NodeAttempt(ctx context.Context, run int64) error {
	return c.getJSON(ctx, nodePath(run, "/attempt"), nil, &struct{}{})
}

// NodeEvent reports one event of a run.
func (c *Client) NodeEvent(ctx context.Context, run int64, ev NodeEvent) error {
	return c.sendJSON(ctx, "POST", nodePath(run, "/events"), ev, nil)
}

// NodeResult reports a run's end.
func (c *Client) NodeResult(ctx context.Context, run int64, res NodeResult) error {
	return c.sendJSON(ctx, "POST", nodePath(run, "/result"), res, nil)
}

func nodePath(run int64, tail string) string {
	return fmt.Sprintf("/api/node/runs/%s%s", url.PathEscape(fmt.Sprint(run)), tail)
}
