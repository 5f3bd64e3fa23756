package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/policies"
)

// StartRun hands the run to the holder of a new lease. It returns false
// when the run has already ended (its result was stored before a crash
// lost the queue's copy of that): the job must then be finished, not run.
// A run with no row at all is ErrRunMissing.
func (s *Store) StartRun(ctx context.Context, runID int64, lease, gpuID string) (started bool, err error) {
	err = s.update(ctx, fmt.Sprintf("start run %d", runID), func(tx *txn) error {
		var subID int64
		var secret bool
		err := tx.QueryRowContext(ctx, `UPDATE runs SET status = 'running', lease_token = ?, gpu_id = ?, attempts = attempts + 1, started_ms = ?
			WHERE id = ? AND status IN ('queued','running') RETURNING submission_id, secret`, lease, gpuID, ms(s.now()), runID).Scan(&subID, &secret)
		if errors.Is(err, sql.ErrNoRows) {
			return missingRun(ctx, tx, runID)
		}
		if err != nil {
			return err
		}
		started = true
		if _, err := tx.ExecContext(ctx, `UPDATE submissions SET status = 'running' WHERE id = ? AND status = 'queued'`, subID); err != nil {
			return err
		}
		return appendEvent(ctx, tx, s.now(), 0, subID, api.RunStarted{Run: runID, GPUID: gpuID, Secret: secret})
	})
	return started, err
}

// ErrRunMissing is a run the store has no row for: its submission was
// deleted (DeletedSubmission says so), or the store lost it.
var ErrRunMissing = errors.New("the run is missing from the store")

// missingRun is nil for a run that is there (it has ended), else
// ErrRunMissing.
func missingRun(ctx context.Context, tx *txn, runID int64) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id = ?`, runID).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("run %d: %w", runID, ErrRunMissing)
	}
	return nil
}

// DeletedSubmission says whether the event log records subID's deletion.
func (s *Store) DeletedSubmission(ctx context.Context, subID int64) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE submission_id = ? AND kind = ?`, subID, api.EventSubmissionDeleted).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read submission %d's events: %w", subID, err)
	}
	return n > 0, nil
}

// RunResult is what the runner learned from one run.
type RunResult struct {
	// Status is done (evaluated), error (the box failed) or cancelled.
	Status string
	Passed bool
	Score  *float64
	// ScoreErr is the score's standard error in seconds, when known.
	ScoreErr   *float64
	Reason     string
	Report     []byte
	SystemInfo []byte
	Telemetry  []byte
	Profile    string
	// Findings are the run's own (a time under the physics floor): like
	// the scanner's flags they hold the submission for review.
	Findings []policies.Finding
	// Unsandboxed says the run went without the sandbox; Unranked, when
	// set, keeps its submission out of the rankings, saying why. Both
	// stick to the submission: a later run does not clear them.
	Unsandboxed bool
	Unranked    string
}

// FinishRun stores a run's result if lease still holds it, and when it was
// the submission's last open run, settles the submission: status, passed,
// and the score that ranks it (a leaderboard run whose twin also passed).
func (s *Store) FinishRun(ctx context.Context, runID int64, lease string, res RunResult) (*Submission, error) {
	var subID int64
	err := s.update(ctx, fmt.Sprintf("finish run %d", runID), func(tx *txn) error {
		var secret bool
		err := tx.QueryRowContext(ctx, `UPDATE runs SET status = ?, passed = ?, score = ?, score_err = ?, reason = ?, report = ?,
				system_info = ?, telemetry = ?, profile_path = ?, finished_ms = ?, lease_token = NULL
			WHERE id = ? AND lease_token = ? AND status = 'running' RETURNING submission_id, secret`,
			res.Status, res.Passed, res.Score, res.ScoreErr, res.Reason, string(res.Report), string(res.SystemInfo), string(res.Telemetry),
			res.Profile, ms(s.now()), runID, lease).Scan(&subID, &secret)
		if errors.Is(err, sql.ErrNoRows) {
			return api.Errorf(api.CodeConflict, "run %d is no longer held by this lease", runID)
		}
		if err != nil {
			return err
		}
		reason := res.Reason
		if secret && reason != "" && res.Status == api.StatusDone {
			reason = "failed on the secret inputs" // the event log is the owner's to read
		}
		if err := appendEvent(ctx, tx, s.now(), 0, subID,
			api.RunFinished{Run: runID, Secret: secret, Status: res.Status, Passed: res.Passed, Reason: reason}); err != nil {
			return err
		}
		if err := flagSubmission(ctx, tx, s.now(), subID, res.Findings); err != nil {
			return err
		}
		if res.Unsandboxed || res.Unranked != "" {
			// The first reason stays, but the public run's wins: it can
			// name the node, where the secret twin's must not.
			if _, err := tx.ExecContext(ctx, `UPDATE submissions SET unsandboxed = unsandboxed OR ?1,
					unranked = CASE WHEN ?2 = '' THEN unranked WHEN unranked = '' OR NOT ?3 THEN ?2 ELSE unranked END WHERE id = ?4`,
				res.Unsandboxed, res.Unranked, secret, subID); err != nil {
				return err
			}
		}
		return settle(ctx, tx, s.now(), subID)
	})
	if err != nil {
		return nil, err
	}
	return s.Submission(ctx, subID)
}

// flagSubmission adds a run's findings to its submission's and holds it
// for review again, even one an organiser cleared of the scanner's flags:
// these are new. A confirmed hack stays confirmed.
func flagSubmission(ctx context.Context, tx *txn, now time.Time, subID int64, findings []policies.Finding) error {
	if len(findings) == 0 {
		return nil
	}
	var stored string
	if err := tx.QueryRowContext(ctx, `SELECT findings FROM submissions WHERE id = ?`, subID).Scan(&stored); err != nil {
		return err
	}
	var all []policies.Finding
	if stored != "" {
		if err := json.Unmarshal([]byte(stored), &all); err != nil {
			return fmt.Errorf("submission %d: stored findings: %w", subID, err)
		}
	}
	b, err := json.Marshal(append(all, findings...))
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE submissions SET findings = ?,
			review = CASE WHEN review = ? THEN review ELSE ? END WHERE id = ?`,
		string(b), api.ReviewConfirmed, api.ReviewFlagged, subID); err != nil {
		return err
	}
	rules := make([]string, len(findings))
	for i, f := range findings {
		rules[i] = f.Rule
	}
	return appendEvent(ctx, tx, now, 0, subID, api.SubmissionFlagged{Rules: rules})
}

// settle closes the submission once none of its runs is open.
func settle(ctx context.Context, tx *txn, now time.Time, subID int64) error {
	runs, err := runsOf(ctx, tx, subID)
	if err != nil {
		return err
	}
	status, passed := api.StatusDone, true
	var score *float64
	reason := ""
	for _, r := range runs {
		if !r.final() {
			return nil
		}
		switch r.Status {
		case api.StatusCancelled:
			status = api.StatusCancelled
		case RunError:
			if status != api.StatusCancelled {
				status = api.StatusFailed
			}
		}
		if !r.Passed {
			passed = false
			if reason == "" {
				reason = r.Reason
				if r.Secret {
					// Say which gate failed, not why: the secret inputs stay secret.
					reason = "the secret-seed run failed"
				}
			}
		}
		if !r.Secret && r.Mode == "leaderboard" {
			score = r.Score
		}
	}
	if status != api.StatusDone || !passed {
		score = nil
		passed = passed && status == api.StatusDone
	}
	var user int64
	// The score's error is its run's: the public leaderboard run.
	if err := tx.QueryRowContext(ctx, `UPDATE submissions SET status = ?, passed = ?, score = ?, reason = ?, finished_ms = ?,
			score_err = CASE WHEN ?3 IS NULL THEN NULL ELSE
				(SELECT r.score_err FROM runs r WHERE r.submission_id = submissions.id AND r.secret = 0 AND r.score IS NOT NULL) END
		WHERE id = ? RETURNING user_id`, status, passed, score, reason, ms(now), subID).Scan(&user); err != nil {
		return err
	}
	return appendEvent(ctx, tx, now, user, subID, api.SubmissionEnded{Status: status, Passed: passed, Score: score, Reason: reason})
}
