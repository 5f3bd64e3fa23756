package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/policies"
	"kernelbox/queue"
)

// RunError is the status of a run the box could not carry out (after its
// attempts); the submission then ends failed.
const RunError = "error"

// Submission is one uploaded file and what became of it: the API's view
// plus the keys the store joins on.
type Submission struct {
	api.Submission
	userID, leaderboardID int64
}

// UserID is the submitter's id: the daemon keeps per-user state (the
// compile cache) under it, as an id is never another user's (users are
// banned, never deleted, so no id is freed for reuse).
func (s *Submission) UserID() int64 { return s.userID }

// RunRecord is one evaluation of a submission (its public run, or its
// secret twin) as the store holds it.
type RunRecord struct {
	api.Run
	submissionID int64
}

func (r *RunRecord) final() bool {
	switch r.Status {
	case api.StatusDone, api.StatusFailed, api.StatusCancelled, RunError:
		return true
	}
	return false
}

// NewSubmission is what the submit path stores.
type NewSubmission struct {
	Leaderboard *Leaderboard
	User        *User
	FileName    string
	Code        []byte
	GPUType     string
	Mode        string
	Category    string
	// Language is what the code is written in (problems.Language).
	Language string
	// Secret asks for the secret-seed twin run (leaderboard mode).
	Secret bool
	// Findings are the scanner's; a flag among them holds the submission
	// out of the rankings until an organiser reviews it.
	Findings []policies.Finding
	// Jobs are the queue's jobs for the new runs, enqueued in the same
	// transaction: an accepted submission always has its jobs.
	Jobs JobsFunc
	// Limits are checked in that transaction too.
	Limits Limits
}

// Limits hold a submission to a rate and a cap. They are checked in the
// transaction that stores it (which holds the write lock from its start),
// so submissions sent at once cannot all pass them: checked before it,
// a cap of 20 let 28 jobs in and 3 an hour let 4 through.
type Limits struct {
	// Rate, when positive, is how many submissions of the category to the
	// leaderboard the user may have made since RateSince.
	Rate      int
	RateSince time.Time
	// MaxQueued, when positive, caps the user's queued jobs, this
	// submission's included.
	MaxQueued int
}

// JobsFunc makes the queue jobs of a submission's runs, one a run.
type JobsFunc func(subID int64, runs []api.Run) ([]queue.NewJob, error)

// CreateSubmission stores the code (once per content), the submission and
// its runs, and logs it, in one transaction.
func (s *Store) CreateSubmission(ctx context.Context, ns NewSubmission) (*Submission, error) {
	sum := sha256.Sum256(ns.Code)
	sha := hex.EncodeToString(sum[:])
	now := s.now()
	sub := &Submission{Submission: api.Submission{Leaderboard: ns.Leaderboard.Name, User: ns.User.Name, FileName: ns.FileName,
		SHA256: sha, GPUType: ns.GPUType, Mode: ns.Mode, Category: ns.Category, Language: ns.Language, Status: api.StatusQueued, Created: now.UTC(),
		Findings: ns.Findings}, userID: ns.User.ID, leaderboardID: ns.Leaderboard.ID}
	var findings string
	if len(ns.Findings) > 0 {
		b, err := json.Marshal(ns.Findings)
		if err != nil {
			return nil, fmt.Errorf("store submission: %w", err)
		}
		findings = string(b)
	}
	if policies.Worst(ns.Findings) == policies.ScanFlag {
		sub.Review = api.ReviewFlagged
	}
	runs := 1
	if ns.Secret {
		runs = 2
	}
	err := s.update(ctx, "store submission", func(tx *txn) error {
		if err := s.checkLimits(ctx, tx, ns, runs); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO code (sha256, data, size) VALUES (?, ?, ?)`, sha, ns.Code, len(ns.Code)); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx, `INSERT INTO submissions (id, leaderboard_id, user_id, file_name, code_sha256, gpu_type, mode, category, language, created_ms, review, findings)
			VALUES (`+nextID+`, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, "submissions",
			ns.Leaderboard.ID, ns.User.ID, ns.FileName, sha, ns.GPUType, ns.Mode, ns.Category, ns.Language, ms(now), sub.Review, findings).Scan(&sub.ID)
		if err != nil {
			return err
		}
		secrets := []bool{false}
		if ns.Secret {
			secrets = append(secrets, true)
		}
		for _, secret := range secrets {
			r := api.Run{Secret: secret, Mode: ns.Mode, Status: api.StatusQueued, GPUType: ns.GPUType}
			if err := tx.QueryRowContext(ctx, `INSERT INTO runs (id, submission_id, secret, mode, gpu_type) VALUES (`+nextID+`, ?, ?, ?, ?) RETURNING id`,
				"runs", sub.ID, secret, ns.Mode, ns.GPUType).Scan(&r.ID); err != nil {
				return err
			}
			sub.Runs = append(sub.Runs, r)
		}
		if ns.Jobs != nil {
			if err := s.enqueueRuns(ctx, tx, sub.ID, sub.Runs, ns.Jobs); err != nil {
				return err
			}
		}
		return appendEvent(ctx, tx, now, ns.User.ID, sub.ID,
			api.SubmissionQueued{Leaderboard: sub.Leaderboard, GPU: sub.GPUType, Mode: sub.Mode, Runs: len(sub.Runs)})
	})
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// rateSpentKept is how long a deleted submission keeps counting against
// rate limits: longer than any limit's window (an hour).
const rateSpentKept = 24 * time.Hour

// checkLimits refuses ns when it would break its Limits, inside tx.
func (s *Store) checkLimits(ctx context.Context, tx *txn, ns NewSubmission, runs int) error {
	lim := ns.Limits
	if lim.Rate > 0 {
		var n int
		err := tx.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM submissions WHERE leaderboard_id = ?1 AND user_id = ?2 AND category = ?3 AND created_ms >= ?4)
			+ (SELECT COUNT(*) FROM rate_spent WHERE leaderboard_id = ?1 AND user_id = ?2 AND category = ?3 AND created_ms >= ?4)`,
			ns.Leaderboard.ID, ns.User.ID, ns.Category, ms(lim.RateSince)).Scan(&n)
		if err != nil {
			return fmt.Errorf("count submissions: %w", err)
		}
		if n >= lim.Rate {
			return api.Errorf(api.CodeExhausted, "rate limit: %d %s submissions per hour to %s, and you have made %d in the last hour",
				lim.Rate, ns.Category, ns.Leaderboard.Name, n)
		}
	}
	if lim.MaxQueued > 0 {
		load, err := s.queue.UserLoadTx(ctx, tx.Tx, ns.User.Name)
		if err != nil {
			return err
		}
		if load.Queued+runs > lim.MaxQueued {
			return api.Errorf(api.CodeExhausted, "you have %d jobs waiting, and the cap is %d: wait for some to finish", load.Queued, lim.MaxQueued)
		}
	}
	return nil
}

// EnqueueRuns enqueues the jobs of runs that have none (a data dir's
// runs from before the store and the queue shared a transaction) and
// records them, in one transaction.
func (s *Store) EnqueueRuns(ctx context.Context, subID int64, runs []api.Run, mk JobsFunc) error {
	return s.update(ctx, fmt.Sprintf("enqueue runs of submission %d", subID), func(tx *txn) error {
		return s.enqueueRuns(ctx, tx, subID, runs, mk)
	})
}

func (s *Store) enqueueRuns(ctx context.Context, tx *txn, subID int64, runs []api.Run, mk JobsFunc) error {
	jobs, err := mk(subID, runs)
	if err != nil {
		return err
	}
	ids, err := s.queue.EnqueueTx(ctx, tx.Tx, jobs...)
	if err != nil {
		return err
	}
	for i := range runs {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET job_id = ? WHERE id = ?`, ids[i], runs[i].ID); err != nil {
			return fmt.Errorf("set job of run %d: %w", runs[i].ID, err)
		}
		runs[i].JobID = ids[i]
	}
	return nil
}

// CancelSubmission cancels the submission's open runs and returns their
// queue jobs, which the caller cancels in the queue.
func (s *Store) CancelSubmission(ctx context.Context, subID int64) ([]int64, error) {
	var jobs []int64
	err := s.update(ctx, fmt.Sprintf("cancel submission %d", subID), func(tx *txn) error {
		var status string
		if err := tx.QueryRowContext(ctx, `SELECT status FROM submissions WHERE id = ?`, subID).Scan(&status); errors.Is(err, sql.ErrNoRows) {
			return api.Errorf(api.CodeNotFound, "no submission %d", subID)
		} else if err != nil {
			return err
		}
		if status != api.StatusQueued && status != api.StatusRunning {
			return api.Errorf(api.CodeConflict, "submission %d is %s already", subID, status)
		}
		var err error
		jobs, err = jobIDs(tx.QueryContext(ctx, `UPDATE runs SET status = 'cancelled', reason = 'cancelled', finished_ms = ?, lease_token = NULL
			WHERE submission_id = ? AND status IN ('queued','running') RETURNING COALESCE(job_id, 0)`, ms(s.now()), subID))
		if err != nil {
			return err
		}
		return settle(ctx, tx, s.now(), subID)
	})
	return jobs, err
}

// FailRun ends a run that the queue gave up on (its attempts spent while no
// runner held it), without a lease.
func (s *Store) FailRun(ctx context.Context, runID int64, status, reason string) error {
	return s.update(ctx, fmt.Sprintf("fail run %d", runID), func(tx *txn) error {
		var subID int64
		err := tx.QueryRowContext(ctx, `UPDATE runs SET status = ?, reason = ?, finished_ms = ?, lease_token = NULL
			WHERE id = ? AND status IN ('queued','running') RETURNING submission_id`, status, reason, ms(s.now()), runID).Scan(&subID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		return settle(ctx, tx, s.now(), subID)
	})
}

const runColumns = `id, submission_id, secret, mode, COALESCE(job_id, 0), status, gpu_type, gpu_id, attempts, passed, score, reason,
	report, system_info, telemetry, profile_path, started_ms, finished_ms`

func scanRun(row interface{ Scan(...any) error }) (RunRecord, error) {
	var r RunRecord
	var score sql.NullFloat64
	var report, sys, tel string
	var started, finished sql.NullInt64
	if err := row.Scan(&r.ID, &r.submissionID, &r.Secret, &r.Mode, &r.JobID, &r.Status, &r.GPUType, &r.GPUID, &r.Attempts,
		&r.Passed, &score, &r.Reason, &report, &sys, &tel, &r.Profile, &started, &finished); err != nil {
		return r, err
	}
	if score.Valid {
		r.Score = &score.Float64
	}
	r.Report, r.SystemInfo, r.Telemetry = rawJSON(report), rawJSON(sys), rawJSON(tel)
	r.Started, r.Finished = fromMS(started), fromMS(finished)
	return r, nil
}

func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func runsOf(ctx context.Context, q queryer, subID int64) ([]RunRecord, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+runColumns+` FROM runs WHERE submission_id = ? ORDER BY secret, id`, subID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RunRecord
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

const submissionColumns = `s.id, l.name, u.name, s.user_id, s.leaderboard_id, s.file_name, s.code_sha256, s.gpu_type, s.mode, s.category,
	s.language, s.status, s.passed, s.score, s.reason, s.hacked, s.review, s.findings, s.created_ms, s.finished_ms,
	s.unsandboxed, s.unranked`

const submissionFrom = ` FROM submissions s JOIN leaderboards l ON l.id = s.leaderboard_id JOIN users u ON u.id = s.user_id`

func scanSubmission(row interface{ Scan(...any) error }) (*Submission, error) {
	var sub Submission
	var score sql.NullFloat64
	var created int64
	var finished sql.NullInt64
	var findings string
	if err := row.Scan(&sub.ID, &sub.Leaderboard, &sub.User, &sub.userID, &sub.leaderboardID, &sub.FileName, &sub.SHA256,
		&sub.GPUType, &sub.Mode, &sub.Category, &sub.Language, &sub.Status, &sub.Passed, &score, &sub.Reason, &sub.Hacked, &sub.Review, &findings,
		&created, &finished, &sub.Unsandboxed, &sub.Unranked); err != nil {
		return nil, err
	}
	if findings != "" {
		if err := json.Unmarshal([]byte(findings), &sub.Findings); err != nil {
			return nil, fmt.Errorf("submission %d findings: %w", sub.ID, err)
		}
	}
	if score.Valid {
		sub.Score = &score.Float64
	}
	sub.Created, sub.Finished = time.UnixMilli(created).UTC(), fromMS(finished)
	return &sub, nil
}

// Submission returns a submission with its runs.
func (s *Store) Submission(ctx context.Context, id int64) (*Submission, error) {
	sub, err := scanSubmission(s.db.QueryRowContext(ctx, `SELECT `+submissionColumns+submissionFrom+` WHERE s.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, api.Errorf(api.CodeNotFound, "no submission %d", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get submission %d: %w", id, err)
	}
	runs, err := runsOf(ctx, s.db, id)
	if err != nil {
		return nil, fmt.Errorf("get submission %d: %w", id, err)
	}
	for _, r := range runs {
		sub.Runs = append(sub.Runs, r.Run)
	}
	return sub, nil
}

// SubmissionStatus returns only a submission's status: what a long-poll
// checks at every wake-up, without the runs' reports.
func (s *Store) SubmissionStatus(ctx context.Context, id int64) (string, error) {
	var st string
	err := s.db.QueryRowContext(ctx, `SELECT status FROM submissions WHERE id = ?`, id).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", api.Errorf(api.CodeNotFound, "no submission %d", id)
	}
	if err != nil {
		return "", fmt.Errorf("status of submission %d: %w", id, err)
	}
	return st, nil
}

// SubmissionFilter narrows a listing; zero fields match everything.
type SubmissionFilter struct {
	UserID      int64
	Leaderboard string
	Status      string
	Limit       int // 50 when zero, at most 1000
}

// Submissions lists submissions, newest first, without their runs.
func (s *Store) Submissions(ctx context.Context, f SubmissionFilter) ([]*Submission, error) {
	var where []string
	var args []any
	if f.UserID != 0 {
		where, args = append(where, "s.user_id = ?"), append(args, f.UserID)
	}
	if f.Leaderboard != "" {
		where, args = append(where, "l.name = ?"), append(args, f.Leaderboard)
	}
	if f.Status != "" {
		where, args = append(where, "s.status = ?"), append(args, f.Status)
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	q := `SELECT ` + submissionColumns + submissionFrom
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY s.id DESC LIMIT ?"
	rows, err := s.db.QueryContext(ctx, q, append(args, min(f.Limit, 1000))...)
	if err != nil {
		return nil, fmt.Errorf("list submissions: %w", err)
	}
	defer rows.Close()
	out := []*Submission{}
	for rows.Next() {
		sub, err := scanSubmission(rows)
		if err != nil {
			return nil, fmt.Errorf("list submissions: %w", err)
		}
		out = append(out, sub)
	}
	return out, rows.Err()
}

// ErrDamaged is stored data that no longer is what was stored: code
// whose bytes do not hash to the name it is kept under.
var ErrDamaged = errors.New("stored data is damaged")

// Code returns stored code by its hash, which it checks: a contestant's
// code changed in the database (a damaged page, a hand edit) must never
// be run, or shown, as theirs.
func (s *Store) Code(ctx context.Context, sha string) ([]byte, error) {
	var data []byte
	err := s.db.QueryRowContext(ctx, `SELECT data FROM code WHERE sha256 = ?`, sha).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, api.Errorf(api.CodeNotFound, "no code %s", sha)
	}
	if err != nil {
		return nil, fmt.Errorf("get code %s: %w", sha, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != sha {
		return nil, fmt.Errorf("code %s: %w: its %d bytes hash to %x", sha, ErrDamaged, len(data), sum[:8])
	}
	return data, nil
}

// OpenRun is a run that has not ended, for recovery at start-up.
type OpenRun struct {
	RunID, SubmissionID, JobID int64
	User, GPUType, Mode        string
	Secret                     bool
}

// OpenRuns lists every run that is queued or running.
func (s *Store) OpenRuns(ctx context.Context) ([]OpenRun, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.id, r.submission_id, COALESCE(r.job_id, 0), u.name, r.gpu_type, r.mode, r.secret
		FROM runs r JOIN submissions s ON s.id = r.submission_id JOIN users u ON u.id = s.user_id
		WHERE r.status IN ('queued','running') ORDER BY r.id`)
	if err != nil {
		return nil, fmt.Errorf("open runs: %w", err)
	}
	defer rows.Close()
	var out []OpenRun
	for rows.Next() {
		var o OpenRun
		if err := rows.Scan(&o.RunID, &o.SubmissionID, &o.JobID, &o.User, &o.GPUType, &o.Mode, &o.Secret); err != nil {
			return nil, fmt.Errorf("open runs: %w", err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// RunContext is everything the runner needs for one run.
type RunContext struct {
	Run         RunRecord
	Submission  *Submission
	Leaderboard *Leaderboard
	Code        []byte
}

// LoadRun gathers a run, its submission, leaderboard and code.
func (s *Store) LoadRun(ctx context.Context, runID int64) (*RunContext, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, api.Errorf(api.CodeNotFound, "no run %d", runID)
	}
	if err != nil {
		return nil, fmt.Errorf("load run %d: %w", runID, err)
	}
	sub, err := s.Submission(ctx, r.submissionID)
	if err != nil {
		return nil, fmt.Errorf("load run %d: %w", runID, err)
	}
	lb, err := s.Leaderboard(ctx, sub.Leaderboard)
	if err != nil {
		return nil, fmt.Errorf("load run %d: %w", runID, err)
	}
	code, err := s.Code(ctx, sub.SHA256)
	if err != nil {
		return nil, fmt.Errorf("load run %d: %w", runID, err)
	}
	return &RunContext{Run: r, Submission: sub, Leaderboard: lb, Code: code}, nil
}

// SetReview records an organiser's review of a flagged submission:
// cleared puts it back in the rankings, confirmed marks it hacked.
func (s *Store) SetReview(ctx context.Context, subID int64, review string) error {
	if review != api.ReviewCleared && review != api.ReviewConfirmed {
		return api.Errorf(api.CodeInvalid, "review %q: want cleared or confirmed", review)
	}
	return s.update(ctx, "review submission", func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE submissions SET review = ?, hacked = hacked OR ? WHERE id = ? AND review != ''`,
			review, review == api.ReviewConfirmed, subID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return api.Errorf(api.CodeNotFound, "submission %d was not flagged by the scanner (`kernelbox admin review` lists those)", subID)
		}
		return appendEvent(ctx, tx, s.now(), 0, subID, api.SubmissionReviewed{Review: review})
	})
}

// Flagged lists the submissions waiting for review, oldest first.
func (s *Store) Flagged(ctx context.Context) ([]*Submission, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+submissionColumns+submissionFrom+` WHERE s.review = 'flagged' ORDER BY s.id`)
	if err != nil {
		return nil, fmt.Errorf("flagged submissions: %w", err)
	}
	defer rows.Close()
	var out []*Submission
	for rows.Next() {
		sub, err := scanSubmission(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sub)
	}
	return out, rows.Err()
}

// SetHacked marks a submission as hacked (or clears it), which takes it
// out of the rankings.
func (s *Store) SetHacked(ctx context.Context, subID int64, hacked bool) error {
	return s.update(ctx, fmt.Sprintf("mark submission %d", subID), func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE submissions SET hacked = ? WHERE id = ?`, hacked, subID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return api.Errorf(api.CodeNotFound, "no submission %d", subID)
		}
		return appendEvent(ctx, tx, s.now(), 0, subID, api.SubmissionHacked{Hacked: hacked})
	})
}

// nextID is the id of a new row of the table named by its argument:
// never one a deleted row had (migrations/0003_ids.sql).
const nextID = `(SELECT last + 1 FROM id_floors WHERE name = ?)`

// DeleteSubmission removes a finished submission and its runs; the event
// log keeps the record that it existed. It returns the jobs of runs that
// were still open, for the caller to cancel.
func (s *Store) DeleteSubmission(ctx context.Context, subID int64) ([]int64, error) {
	var jobs []int64
	err := s.update(ctx, fmt.Sprintf("delete submission %d", subID), func(tx *txn) error {
		var err error
		jobs, err = jobIDs(tx.QueryContext(ctx, `SELECT COALESCE(job_id, 0) FROM runs WHERE submission_id = ? AND status IN ('queued','running')`, subID))
		if err != nil {
			return err
		}
		// Its place in its user's rate limit stays taken.
		keep := ms(s.now().Add(-rateSpentKept))
		if _, err := tx.ExecContext(ctx, `DELETE FROM rate_spent WHERE created_ms < ?`, keep); err != nil {
			return fmt.Errorf("prune rate_spent: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO rate_spent (leaderboard_id, user_id, category, created_ms)
			SELECT leaderboard_id, user_id, category, created_ms FROM submissions WHERE id = ? AND created_ms >= ?`, subID, keep); err != nil {
			return fmt.Errorf("keep the rate limit's count: %w", err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM submissions WHERE id = ?`, subID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return api.Errorf(api.CodeNotFound, "no submission %d", subID)
		}
		return appendEvent(ctx, tx, s.now(), 0, subID, api.SubmissionDeleted{})
	})
	return jobs, err
}

// jobIDs reads a column of job ids, leaving out the runs without a job.
func jobIDs(rows *sql.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var j int64
		if err := rows.Scan(&j); err != nil {
			return nil, err
		}
		if j != 0 {
			out = append(out, j)
		}
	}
	return out, rows.Err()
}

// SubmissionOf is a submission held away from the store: a Slurm node's
// copy of the one it runs, which keys its compile cache by userID.
func SubmissionOf(s api.Submission, userID int64) *Submission {
	return &Submission{Submission: s, userID: userID}
}
