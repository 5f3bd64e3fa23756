package api

import (
	"encoding/json"
	"time"

	"kernelbox/policies"
)

// Role is what a user may do.
type Role string

// The roles.
const (
	RoleAdmin      Role = "admin"      // everything, including other admins
	RoleOrganiser  Role = "organiser"  // problems, leaderboards, invites, reviews, contestants
	RoleContestant Role = "contestant" // submit and read
)

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleAdmin, RoleOrganiser, RoleContestant:
		return r, nil
	}
	return "", Errorf(CodeInvalid, "role %q: want admin, organiser or contestant", s)
}

// Staff reports whether the role may run organiser commands.
func (r Role) Staff() bool { return r == RoleAdmin || r == RoleOrganiser }

// User is an account as the API shows it (GET /api/me, /api/admin/users).
type User struct {
	Name    string    `json:"name"`
	Role    Role      `json:"role"`
	Banned  bool      `json:"banned"`
	Created time.Time `json:"created"`
}

// Credentials are a user and a token, as registering or creating a user
// returns them; the token is shown this once.
type Credentials struct {
	User  User   `json:"user"`
	Token string `json:"token"`
}

// Invite is the request of POST /api/admin/invites.
type Invite struct {
	Role         Role      `json:"role"`
	Uses         int       `json:"uses"`
	Expires      time.Time `json:"expires,omitzero"`
	Leaderboards []string  `json:"leaderboards"`
}

// InviteCode is what creating an invite returns.
type InviteCode struct {
	Invite       string   `json:"invite"`
	ID           string   `json:"id"` // what lists and revokes it: the code is shown only once
	Role         Role     `json:"role"`
	Uses         int      `json:"uses"`
	Leaderboards []string `json:"leaderboards"`
}

// Stats is GET /api/admin/stats: what the box has done since Since (the
// zero time: ever). GPU seconds are the runs' wall time, by GPU type.
type Stats struct {
	Since         time.Time          `json:"since,omitzero"`
	Users         int                `json:"users"`
	Banned        int                `json:"banned"`
	ActiveUsers   int                `json:"active_users"` // who submitted
	Submissions   int                `json:"submissions"`
	Flagged       int                `json:"flagged"` // awaiting review
	Hacked        int                `json:"hacked"`
	ByStatus      map[string]int     `json:"by_status"`
	ByMode        map[string]int     `json:"by_mode"`
	ByLeaderboard map[string]int     `json:"by_leaderboard"`
	GPUSeconds    map[string]float64 `json:"gpu_seconds"`
}

// InviteInfo is an invite as GET /api/admin/invites lists it: the code
// itself is stored only hashed.
type InviteInfo struct {
	ID           string    `json:"id"`
	Role         Role      `json:"role"`
	UsesLeft     int       `json:"uses_left"`
	Expires      time.Time `json:"expires,omitzero"`
	Created      time.Time `json:"created"`
	Leaderboards []string  `json:"leaderboards"`
}

// Visibility says who may submit to a leaderboard.
type Visibility string

// The visibilities.
const (
	VisibilityOpen   Visibility = "open"   // every contestant
	VisibilityClosed Visibility = "closed" // members only (an invite scoped to it, or staff)
)

// Rate-limit categories: test mode, and the timed modes.
const (
	CategoryTest   = "test"
	CategoryRanked = "ranked"
)

// Leaderboard is one problem offered for ranking.
type Leaderboard struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Lang        string         `json:"lang"`
	RankingBy   string         `json:"ranking_by"`
	Deadline    time.Time      `json:"deadline,omitzero"`
	Visibility  Visibility     `json:"visibility"`
	GPUs        []string       `json:"gpus"`
	RateLimits  map[string]int `json:"rate_limits"` // category -> submissions per user per hour
	Created     time.Time      `json:"created"`
	Updated     time.Time      `json:"updated"`
}

// LeaderboardInfo is a leaderboard with what this box makes of it.
type LeaderboardInfo struct {
	Leaderboard
	// State is active, or ended once the deadline has passed.
	State string `json:"state"`
	// Available are the GPU types this box can run it on now.
	Available []string `json:"available_gpus"`
	Templates []string `json:"templates,omitempty"`
	// Tests and Benchmarks are the public cases ("size: 127; seed: 4242"),
	// as the problem's page lists them; ranked runs draw their own seeds.
	Tests      []string `json:"tests,omitempty"`
	Benchmarks []string `json:"benchmarks,omitempty"`
	Member     bool     `json:"member,omitempty"`
	// TimedBy says whose harness times the problem's runs: "judge" (ours)
	// or "problem" (its own eval.py, in the submission's process: less
	// trusted; problems.TimedByNote is what to show).
	TimedBy string `json:"timed_by,omitempty"`
}

// LeaderboardChange is an organiser's edit (PATCH /api/admin/leaderboards/NAME).
type LeaderboardChange struct {
	Visibility *Visibility `json:"visibility,omitempty"`
	// Deadline replaces the deadline; the zero time removes it.
	Deadline *time.Time `json:"deadline,omitempty"`
	// RateLimits sets limits per category; a negative value removes one.
	RateLimits map[string]int `json:"rate_limits,omitempty"`
	// GPUs replaces the GPU types it ranks on (a KernelBot set names B200
	// and the box has H200s). Each type's measurements stay its own: a
	// type taken off keeps its ranking, out of view until it is put back.
	GPUs []string `json:"gpus,omitempty"`
}

// RankRow is one user's best on a leaderboard and GPU type.
type RankRow struct {
	Rank  int     `json:"rank"`
	User  string  `json:"user"`
	Score float64 `json:"score"` // seconds, lower is better
	// ScoreErr is the score's standard error in seconds (0: unknown), and
	// Interval the half-width of the interval the ranking compares: 1.96
	// errors, and at least the box's tie floor (ranking_tie_floor) of the
	// score, the spread seen between runs of one kernel.
	ScoreErr float64 `json:"score_err,omitempty"`
	Interval float64 `json:"interval,omitempty"`
	// Tie is set when this entry's interval overlaps the one above it:
	// the two are a statistical tie, ordered by noise, not by speed.
	Tie bool `json:"tie,omitempty"`
	// Language is what the entry is written in (PyTorch, Triton, CUDA
	// inline, CUDA, HIP, CuTe DSL); empty for entries from before it was
	// recorded.
	Language   string    `json:"language,omitempty"`
	Submission int64     `json:"submission"`
	At         time.Time `json:"at"`
	// Unsandboxed marks an entry whose runs went without the sandbox: its
	// code ran with the rights of the machine that ran it. It ranks only
	// where the organiser allows it (slurm.rank_unsandboxed).
	Unsandboxed bool `json:"unsandboxed,omitempty"`
}

// Entry is one ranked entry's timings per benchmark shape (GET
// /api/leaderboards/NAME/entries/ID): what anyone who may read the
// leaderboard sees of an entry beyond its score, the public run's means,
// never its code or its secret run.
type Entry struct {
	Leaderboard string       `json:"leaderboard"`
	GPU         string       `json:"gpu"`
	Row         RankRow      `json:"row"`
	Shapes      []EntryShape `json:"shapes"`
}

// EntryShape is one benchmark's mean and its standard error.
type EntryShape struct {
	Spec   string  `json:"spec"`
	MeanNs float64 `json:"mean_ns"`
	ErrNs  float64 `json:"err_ns"`
}

// GPURanking is a leaderboard's ranking on one GPU type.
type GPURanking struct {
	GPU  string    `json:"gpu"`
	Rows []RankRow `json:"rows"`
}

// Ranking is a leaderboard's rankings, one per GPU type.
type Ranking struct {
	Leaderboard string `json:"leaderboard"`
	RankingBy   string `json:"ranking_by"`
	// TimedBy is LeaderboardInfo.TimedBy: "problem" marks a ranking of
	// times the problem's own harness took (less trusted).
	TimedBy  string       `json:"timed_by,omitempty"`
	Rankings []GPURanking `json:"rankings"`
}

// LoadedProblem is one problem of a loaded set and what the load did to
// its leaderboard (Action: LoadCreated ...).
type LoadedProblem struct {
	Leaderboard string    `json:"leaderboard"`
	Action      string    `json:"action"`
	Created     bool      `json:"created"`
	GPUs        []string  `json:"gpus,omitempty"`
	Deadline    time.Time `json:"deadline,omitzero"`
	Error       string    `json:"error,omitempty"` // why it was refused or did not load
	Warnings    []string  `json:"warnings,omitempty"`
}

// Submission statuses. done means evaluated (passed or not); failed means
// the box could not evaluate it, after its retries.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusDone      = "done"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Ended reports whether a submission in this status will change no more.
func Ended(status string) bool { return status != StatusQueued && status != StatusRunning }

// Review states of a submission the scanner flagged.
const (
	ReviewFlagged   = "flagged"
	ReviewCleared   = "cleared"
	ReviewConfirmed = "confirmed"
)

// SubmitRequest is one upload (POST /api/submissions: the file is the
// body, the rest the query). Empty Leaderboard and GPU are read from the
// file's #!POPCORN directives.
type SubmitRequest struct {
	Leaderboard string
	GPU         string
	Mode        string
	FileName    string
	Code        []byte
}

// Submission is one uploaded file and what became of it.
type Submission struct {
	ID          int64    `json:"id"`
	Leaderboard string   `json:"leaderboard"`
	User        string   `json:"user"`
	FileName    string   `json:"file_name"`
	SHA256      string   `json:"sha256"`
	GPUType     string   `json:"gpu"`
	Mode        string   `json:"mode"`
	Category    string   `json:"category"`
	Language    string   `json:"language,omitempty"`
	Status      string   `json:"status"`
	Passed      bool     `json:"passed"`
	Score       *float64 `json:"score"`
	Reason      string   `json:"reason,omitempty"`
	Hacked      bool     `json:"hacked,omitempty"`
	// Review is the scanner's and the organisers' say: "" (nothing
	// found), flagged (kept out of the rankings), cleared or confirmed.
	Review   string             `json:"review,omitempty"`
	Findings []policies.Finding `json:"findings,omitempty"`
	// Unsandboxed says that one of its runs ran without the sandbox (its
	// runs' system_info.isolation says where); Unranked, when set, is why
	// it is kept out of the rankings although it passed (a coordinator
	// that does not rank unsandboxed runs).
	Unsandboxed bool      `json:"unsandboxed,omitempty"`
	Unranked    string    `json:"unranked,omitempty"`
	Created     time.Time `json:"created"`
	Finished    time.Time `json:"finished,omitzero"`
	Runs        []Run     `json:"runs,omitempty"`
}

// Run is one evaluation of a submission: its public run, or its secret twin.
type Run struct {
	ID       int64    `json:"id"`
	Secret   bool     `json:"secret"`
	Mode     string   `json:"mode"`
	JobID    int64    `json:"job,omitempty"`
	Status   string   `json:"status"`
	GPUType  string   `json:"gpu"`
	GPUID    string   `json:"gpu_id,omitempty"`
	Attempts int      `json:"attempts"`
	Passed   bool     `json:"passed"`
	Score    *float64 `json:"score"`
	Reason   string   `json:"reason,omitempty"`
	// Report is the harness's problems.Report; SystemInfo and Telemetry are
	// the machine and the GPU's readings during the run.
	Report     json.RawMessage `json:"report,omitempty"`
	SystemInfo json.RawMessage `json:"system_info,omitempty"`
	Telemetry  json.RawMessage `json:"telemetry,omitempty"`
	// Profile names the run's Nsight Compute report on the server, when
	// there is one (GET /api/submissions/ID/profile fetches it).
	Profile  string    `json:"profile,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
}

// SubmissionView is a submission as its owner (or staff) sees it.
type SubmissionView struct {
	Submission
	Code string `json:"code,omitempty"`
}

// Flagged is the answer of GET /api/admin/review.
type Flagged struct {
	Submissions []Submission `json:"submissions"`
}

// QueueStatus is what `kernelbox queue` shows.
type QueueStatus struct {
	GPUs []GPUQueue `json:"gpus"`
	Mine []MyJob    `json:"mine"`
}

// GPUQueue is one GPU type's line.
type GPUQueue struct {
	GPUType string        `json:"gpu"`
	Slots   int           `json:"slots"`
	Queued  int           `json:"queued"`
	Running int           `json:"running"`
	MeanRun time.Duration `json:"mean_run_ns"`
}

// MyJob is one of the caller's unfinished runs.
type MyJob struct {
	Submission int64         `json:"submission"`
	Run        int64         `json:"run"`
	GPUType    string        `json:"gpu"`
	State      string        `json:"state"`
	Position   int           `json:"position"` // 0: next; only when queued
	ETA        time.Duration `json:"eta_ns"`   // until it starts, from recent run times
}

// Health is the answer of GET /api/health.
type Health struct {
	Status   string         `json:"status"` // ok, or degraded when the box cannot evaluate
	Version  string         `json:"version"`
	Problems []string       `json:"problems,omitempty"`
	GPUs     map[string]int `json:"gpus"` // type -> slots
	Reasons  []string       `json:"reasons,omitempty"`
	// Canaries are each GPU type's last canary: a tiny bundled problem
	// evaluated through the contestants' path (sandbox, harness, judge).
	Canaries []Canary `json:"canaries,omitempty"`
}

// Canary is one GPU type's last canary run.
type Canary struct {
	GPUType string `json:"gpu"`
	// Pending is true until the type's first canary has ended.
	Pending bool          `json:"pending,omitempty"`
	OK      bool          `json:"ok"`
	Slot    string        `json:"slot,omitempty"` // where it ran
	At      time.Time     `json:"at,omitzero"`
	Took    time.Duration `json:"took_ns,omitempty"`
	// Reason is why it failed, and Fix the operator's next step.
	Reason string `json:"reason,omitempty"`
	Fix    string `json:"fix,omitempty"`
}
