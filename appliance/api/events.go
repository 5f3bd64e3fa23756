package api

import (
	"encoding/json"
	"fmt"
	"time"

	"kernelbox/problems"
)

// EventKind names an entry of the append-only event log. Each kind has
// one payload type (Payload), so that the daemon cannot write a kind with
// the wrong fields and a client can decode what it reads.
type EventKind string

// The event kinds, with their payloads.
const (
	EventUserCreated        EventKind = "user.created"         // UserCreated
	EventUserRegistered     EventKind = "user.registered"      // UserRegistered
	EventUserBanned         EventKind = "user.banned"          // UserBanned
	EventUserJoined         EventKind = "user.joined"          // UserJoined
	EventTokenIssued        EventKind = "token.issued"         // TokenIssued
	EventInviteCreated      EventKind = "invite.created"       // InviteCreated
	EventInviteRevoked      EventKind = "invite.revoked"       // InviteRevoked
	EventLeaderboardPut     EventKind = "leaderboard.put"      // LeaderboardPut
	EventLeaderboardChanged EventKind = "leaderboard.changed"  // LeaderboardChanged
	EventLeaderboardDeleted EventKind = "leaderboard.deleted"  // LeaderboardDeleted
	EventSubmissionQueued   EventKind = "submission.queued"    // SubmissionQueued
	EventSubmissionFlagged  EventKind = "submission.flagged"   // SubmissionFlagged
	EventSubmissionReview   EventKind = "submission.review"    // SubmissionReviewed
	EventSubmissionHacked   EventKind = "submission.hacked"    // SubmissionHacked
	EventSubmissionDeleted  EventKind = "submission.deleted"   // SubmissionDeleted
	EventSubmissionDone     EventKind = "submission.done"      // SubmissionEnded
	EventSubmissionFailed   EventKind = "submission.failed"    // SubmissionEnded
	EventSubmissionCancel   EventKind = "submission.cancelled" // SubmissionEnded
	EventRunStarted         EventKind = "run.started"          // RunStarted
	EventRunRetried         EventKind = "run.retried"          // RunRetried
	EventRunTest            EventKind = "run.test"             // RunTest
	EventRunPhase           EventKind = "run.phase"            // RunPhase
	EventRunFinished        EventKind = "run.finished"         // RunFinished
	EventStoreLossAccepted  EventKind = "store.loss_accepted"  // StoreLossAccepted
)

// Event is one entry of the log, as GET /api/submissions/ID/events returns
// it. Data is the payload of Kind; Payload decodes it.
type Event struct {
	ID         int64           `json:"id"`
	At         time.Time       `json:"at"`
	Kind       EventKind       `json:"kind"`
	Submission int64           `json:"submission,omitempty"`
	Data       json.RawMessage `json:"data"`
}

// EventsPage is one answer of the long-poll.
type EventsPage struct {
	Events []Event `json:"events"`
	// Next is the cursor for the next call (after=Next).
	Next int64 `json:"next"`
	// Done is set once the submission has ended: stop polling.
	Done   bool   `json:"done"`
	Status string `json:"status"`
}

// Payload is the data of one event kind.
type Payload interface {
	EventKind() EventKind
}

// payloads makes the empty payload of each kind: the one table a kind is
// added to.
var payloads = map[EventKind]func() Payload{
	EventUserCreated:        func() Payload { return &UserCreated{} },
	EventUserRegistered:     func() Payload { return &UserRegistered{} },
	EventUserBanned:         func() Payload { return &UserBanned{} },
	EventUserJoined:         func() Payload { return &UserJoined{} },
	EventTokenIssued:        func() Payload { return &TokenIssued{} },
	EventInviteCreated:      func() Payload { return &InviteCreated{} },
	EventInviteRevoked:      func() Payload { return &InviteRevoked{} },
	EventLeaderboardPut:     func() Payload { return &LeaderboardPut{} },
	EventLeaderboardChanged: func() Payload { return &LeaderboardChanged{} },
	EventLeaderboardDeleted: func() Payload { return &LeaderboardDeleted{} },
	EventSubmissionQueued:   func() Payload { return &SubmissionQueued{} },
	EventSubmissionFlagged:  func() Payload { return &SubmissionFlagged{} },
	EventSubmissionReview:   func() Payload { return &SubmissionReviewed{} },
	EventSubmissionHacked:   func() Payload { return &SubmissionHacked{} },
	EventSubmissionDeleted:  func() Payload { return &SubmissionDeleted{} },
	EventSubmissionDone:     func() Payload { return &SubmissionEnded{Status: StatusDone} },
	EventSubmissionFailed:   func() Payload { return &SubmissionEnded{Status: StatusFailed} },
	EventSubmissionCancel:   func() Payload { return &SubmissionEnded{Status: StatusCancelled} },
	EventRunStarted:         func() Payload { return &RunStarted{} },
	EventRunRetried:         func() Payload { return &RunRetried{} },
	EventRunTest:            func() Payload { return &RunTest{} },
	EventRunPhase:           func() Payload { return &RunPhase{} },
	EventRunFinished:        func() Payload { return &RunFinished{} },
	EventStoreLossAccepted:  func() Payload { return &StoreLossAccepted{} },
}

// Payload decodes the event's data into its kind's type. A kind this
// client does not know (a newer daemon) is an error the caller may skip.
func (e Event) Payload() (Payload, error) {
	mk, ok := payloads[e.Kind]
	if !ok {
		return nil, fmt.Errorf("event %d: unknown kind %q", e.ID, e.Kind)
	}
	p := mk()
	if err := json.Unmarshal(e.Data, p); err != nil {
		return nil, fmt.Errorf("event %d (%s): %w", e.ID, e.Kind, err)
	}
	return p, nil
}

// StoreLossAccepted: the daemon started on a database older than its data
// directory's record (`kernelbox serve --accept-store-loss`): what the
// record said had been handed out. Ids up to those are never handed out
// again.
type StoreLossAccepted struct {
	StoreID     string `json:"store_id"`
	Submissions int64  `json:"submissions"`
	Runs        int64  `json:"runs"`
}

// UserCreated: staff added a user.
type UserCreated struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
}

// UserRegistered: someone redeemed an invite for an account.
type UserRegistered struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
}

// UserBanned: a ban was set or lifted.
type UserBanned struct {
	Banned bool `json:"banned"`
}

// UserJoined: a user redeemed an invite for closed leaderboards.
type UserJoined struct {
	Leaderboards []string `json:"leaderboards"`
}

// TokenIssued: a user got a new token.
type TokenIssued struct {
	RevokedOthers bool `json:"revoked_others"`
}

// InviteCreated: staff made an invite (the code itself is not logged).
type InviteCreated struct {
	Invite
}

// InviteRevoked: staff revoked an invite, named by its id.
type InviteRevoked struct {
	ID string `json:"id"`
}

// LeaderboardDeleted: staff deleted a leaderboard, and its submissions.
type LeaderboardDeleted struct {
	Name        string `json:"name"`
	Submissions int    `json:"submissions"`
}

// LeaderboardPut: a problem load created or replaced a leaderboard.
type LeaderboardPut struct {
	Name    string   `json:"name"`
	Created bool     `json:"created"`
	GPUs    []string `json:"gpus"`
}

// LeaderboardChanged: an organiser edited a leaderboard.
type LeaderboardChanged struct {
	Name   string            `json:"name"`
	Change LeaderboardChange `json:"change"`
}

// SubmissionQueued: a submission was accepted and its runs enqueued.
type SubmissionQueued struct {
	Leaderboard string `json:"leaderboard"`
	GPU         string `json:"gpu"`
	Mode        string `json:"mode"`
	Runs        int    `json:"runs"`
}

// SubmissionFlagged: the scanner or a run's own check held the submission
// for review.
type SubmissionFlagged struct {
	Rules []string `json:"rules"`
}

// SubmissionReviewed: an organiser cleared or confirmed a flag.
type SubmissionReviewed struct {
	Review string `json:"review"`
}

// SubmissionHacked: staff marked a submission hacked, or cleared the mark.
type SubmissionHacked struct {
	Hacked bool `json:"hacked"`
}

// SubmissionDeleted: staff deleted a submission.
type SubmissionDeleted struct{}

// SubmissionEnded: every run of the submission is final. Status (done,
// failed or cancelled) is in the kind, not the data.
type SubmissionEnded struct {
	Status string   `json:"-"`
	Passed bool     `json:"passed"`
	Score  *float64 `json:"score"`
	Reason string   `json:"reason"`
}

// RunStarted: a slot began a run.
type RunStarted struct {
	Run    int64  `json:"run"`
	GPUID  string `json:"gpu_id"`
	Secret bool   `json:"secret"`
}

// RunRetried: the box failed to carry a run out and queued it again.
type RunRetried struct {
	Run     int64 `json:"run"`
	Attempt int   `json:"attempt"`
}

// RunTest: the harness reported one test, as it ran (public runs only).
type RunTest struct {
	Run    int64  `json:"run"`
	Phase  string `json:"phase"`
	Index  int    `json:"index"`
	Spec   string `json:"spec"`
	Status string `json:"status"` // pass or fail
}

// RunPhase: a phase (test, benchmark, leaderboard, profile) of a run
// ended. A secret run's cases are not shown: they would reveal the secret
// seed's inputs.
type RunPhase struct {
	Run        int64                      `json:"run"`
	Secret     bool                       `json:"secret"`
	Phase      string                     `json:"phase"`
	Passed     bool                       `json:"passed"`
	Reason     string                     `json:"reason,omitempty"`
	Wall       time.Duration              `json:"wall_ns"`
	Tests      []problems.TestResult      `json:"tests,omitempty"`
	Benchmarks []problems.BenchmarkResult `json:"benchmarks,omitempty"`
}

// RunFinished: a run's result was stored.
type RunFinished struct {
	Run    int64  `json:"run"`
	Secret bool   `json:"secret"`
	Status string `json:"status"`
	Passed bool   `json:"passed"`
	Reason string `json:"reason"`
}

// EventKind implementations: one kind per payload type.

func (UserCreated) EventKind() EventKind        { return EventUserCreated }
func (UserRegistered) EventKind() EventKind     { return EventUserRegistered }
func (UserBanned) EventKind() EventKind         { return EventUserBanned }
func (UserJoined) EventKind() EventKind         { return EventUserJoined }
func (TokenIssued) EventKind() EventKind        { return EventTokenIssued }
func (InviteCreated) EventKind() EventKind      { return EventInviteCreated }
func (InviteRevoked) EventKind() EventKind      { return EventInviteRevoked }
func (LeaderboardDeleted) EventKind() EventKind { return EventLeaderboardDeleted }
func (LeaderboardPut) EventKind() EventKind     { return EventLeaderboardPut }
func (LeaderboardChanged) EventKind() EventKind { return EventLeaderboardChanged }
func (SubmissionQueued) EventKind() EventKind   { return EventSubmissionQueued }
func (SubmissionFlagged) EventKind() EventKind  { return EventSubmissionFlagged }
func (SubmissionReviewed) EventKind() EventKind { return EventSubmissionReview }
func (SubmissionHacked) EventKind() EventKind   { return EventSubmissionHacked }
func (SubmissionDeleted) EventKind() EventKind  { return EventSubmissionDeleted }
func (RunStarted) EventKind() EventKind         { return EventRunStarted }
func (RunRetried) EventKind() EventKind         { return EventRunRetried }
func (RunTest) EventKind() EventKind            { return EventRunTest }
func (RunPhase) EventKind() EventKind           { return EventRunPhase }
func (RunFinished) EventKind() EventKind        { return EventRunFinished }
func (StoreLossAccepted) EventKind() EventKind  { return EventStoreLossAccepted }

// EventKind is submission.STATUS.
func (e SubmissionEnded) EventKind() EventKind { return EventKind("submission." + e.Status) }
