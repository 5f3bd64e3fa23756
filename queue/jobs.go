package queue

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"
)

// Sentinel errors of the queue.
var (
	// ErrNoJob: nothing is ready for the asked GPU type.
	ErrNoJob = errors.New("no job ready")
	// ErrLeaseLost: the job is no longer held under this lease (reaped,
	// cancelled, or finished by someone else).
	ErrLeaseLost = errors.New("lease lost")
	// ErrNotFound: no job has that id.
	ErrNotFound = errors.New("job not found")
	// ErrSchemaTooNew: the database was written by a newer kernelbox.
	ErrSchemaTooNew = errors.New("schema too new")
)

// Class orders jobs: every ready test-class job runs before any ranked one,
// so a contestant checking correctness is not stuck behind timed runs.
type Class int

// The job classes.
const (
	ClassTest   Class = 0
	ClassRanked Class = 1
)

// State is a job's place in its life.
type State string

// The job states.
const (
	Queued    State = "queued"
	Leased    State = "leased"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Cancelled State = "cancelled"
	TimedOut  State = "timed_out"
)

// NewJob is what Enqueue takes.
type NewJob struct {
	Class   Class
	User    string
	GPUType string
	// Payload is the caller's description of the work; the queue stores it
	// and hands it back, nothing more.
	Payload []byte
	// MaxAttempts bounds retries of infrastructure failures; 3 when zero.
	MaxAttempts int
	// Key, when set, makes Enqueue idempotent: a job whose key is already
	// stored is not added again, and its existing id is returned.
	Key string
	// GPUs is how many GPUs of GPUType the job needs at once (a gang); 1
	// when zero.
	GPUs int
}

// Job is a stored job.
type Job struct {
	ID          int64
	Class       Class
	User        string
	GPUType     string
	Payload     []byte
	State       State
	Attempts    int
	MaxAttempts int
	Created     time.Time
	Started     time.Time // zero until it runs
	Finished    time.Time // zero until it ends
	Error       string
	Key         string
	GPUs        int
}

// Final reports whether the job has ended.
func (j *Job) Final() bool {
	switch j.State {
	case Succeeded, Failed, Cancelled, TimedOut:
		return true
	}
	return false
}

// Lease is a claimed job together with the token that proves the claim.
type Lease struct {
	Job
	Token string
	Until time.Time
}

// Enqueue stores the jobs in one transaction: all of them or none, so a
// leaderboard submission never has its public run without its secret twin.
func (s *Store) Enqueue(ctx context.Context, jobs ...NewJob) ([]int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	defer tx.Rollback()
	ids, err := s.EnqueueTx(ctx, tx, jobs...)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	return ids, nil
}

// EnqueueTx stores the jobs in the caller's transaction on the queue's
// database: the submission and its jobs are committed together, or
// neither is. A job whose Key is already queued is not added again; its
// id is returned.
func (s *Store) EnqueueTx(ctx context.Context, tx *sql.Tx, jobs ...NewJob) ([]int64, error) {
	now := ms(s.now())
	ids := make([]int64, 0, len(jobs))
	for _, j := range jobs {
		if j.User == "" || j.GPUType == "" {
			return nil, fmt.Errorf("enqueue: job needs a user and a GPU type")
		}
		if j.MaxAttempts <= 0 {
			j.MaxAttempts = 3
		}
		if j.GPUs <= 0 {
			j.GPUs = 1
		}
		if j.Payload == nil {
			j.Payload = []byte{}
		}
		var key any
		if j.Key != "" {
			key = j.Key
		}
		var id int64
		err := tx.QueryRowContext(ctx, `INSERT INTO jobs (class, user, gpu_type, payload, max_attempts, created_ms, run_after_ms, key, gpus)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING RETURNING id`,
			j.Class, j.User, j.GPUType, j.Payload, j.MaxAttempts, now, now, key, j.GPUs).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			err = tx.QueryRowContext(ctx, `SELECT id FROM jobs WHERE key = ?`, j.Key).Scan(&id)
		}
		if err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// ClaimRequest says which job a free GPU slot may take.
type ClaimRequest struct {
	GPUType string
	// Boot identifies this daemon's life; leases of other boots are orphans.
	Boot string
	TTL  time.Duration
	// AgePerSecond is the fair-share credit a waiting job earns, in
	// GPU-milliseconds per second waited, so a heavy user's job still runs.
	AgePerSecond int64
	// MaxRunningPerUser skips users who already hold that many leases (on
	// any GPU type), so one user cannot take every slot; 0 means no cap.
	MaxRunningPerUser int
	// Free is how many GPUs of the type are idle now: the job taken needs
	// no more (1 when zero).
	Free int
	// Capacity is how many GPUs of the type can take jobs at all (not
	// drained; Free when zero): a job needing more is passed by, not
	// waited for, until the box has them again.
	Capacity int
	// BackfillLimit is how many jobs may start ahead of a gang job that
	// heads the queue and does not fit yet; after that the free GPUs wait
	// for it (a reservation), so single-GPU jobs cannot starve it.
	BackfillLimit int
}

// readyOrder is the pick: class first (test before ranked), then the user
// who has used the least GPU time less the credit for waiting, then the
// oldest. Its arguments: gpu type, now, the running cap, the largest gang,
// now, the credit.
const readyOrder = `FROM jobs j LEFT JOIN usage u ON u.user = j.user
	WHERE j.state = 'queued' AND j.gpu_type = ? AND j.run_after_ms <= ?
	  AND (SELECT COUNT(*) FROM jobs h WHERE h.user = j.user AND h.state IN ('leased','running')) < ?
	  AND j.gpus <= ?
	ORDER BY j.class, COALESCE(u.gpu_ms, 0) - (? - j.created_ms) / 1000 * ?, j.id
	LIMIT 1`

// Claim leases the next ready job of r.GPUType that fits in r.Free GPUs.
// The job at the head of the queue (readyOrder, among jobs the box can hold
// at all) goes first; when it needs more GPUs than are free, the best job
// that fits starts instead, at most r.BackfillLimit times, each counted on
// the waiting job, after which nothing of the type starts until it fits.
// One transaction, so two claims never take the same job.
func (s *Store) Claim(ctx context.Context, r ClaimRequest) (*Lease, error) {
	token, err := newToken()
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", r.GPUType, err)
	}
	now := ms(s.now())
	until := now + r.TTL.Milliseconds()
	capRunning := r.MaxRunningPerUser
	if capRunning <= 0 {
		capRunning = math.MaxInt32
	}
	free := max(r.Free, 1)
	capacity := r.Capacity
	if capacity <= 0 {
		capacity = free
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", r.GPUType, err)
	}
	defer tx.Rollback()
	var head, gpus, passed int64
	err = tx.QueryRowContext(ctx, `SELECT j.id, j.gpus, j.passed_over `+readyOrder,
		r.GPUType, now, capRunning, capacity, now, r.AgePerSecond).Scan(&head, &gpus, &passed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoJob
	}
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", r.GPUType, err)
	}
	pick := head
	if gpus > int64(free) {
		if passed >= int64(r.BackfillLimit) {
			return nil, ErrNoJob // the free GPUs are held for the head
		}
		err = tx.QueryRowContext(ctx, `SELECT j.id `+readyOrder,
			r.GPUType, now, capRunning, free, now, r.AgePerSecond).Scan(&pick)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNoJob
		}
		if err != nil {
			return nil, fmt.Errorf("claim %s: %w", r.GPUType, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET passed_over = passed_over + 1 WHERE id = ?`, head); err != nil {
			return nil, fmt.Errorf("claim %s: pass over job %d: %w", r.GPUType, head, err)
		}
	}
	row := tx.QueryRowContext(ctx, `UPDATE jobs SET state = 'leased', lease_token = ?, lease_boot = ?, lease_until_ms = ?, attempts = attempts + 1
		WHERE id = ? RETURNING `+jobColumns, token, r.Boot, until, pick)
	var l Lease
	if err := scanJob(row, &l.Job); err != nil {
		return nil, fmt.Errorf("claim %s: job %d: %w", r.GPUType, pick, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("claim %s: %w", r.GPUType, err)
	}
	l.Token = token
	l.Until = time.UnixMilli(until)
	return &l, nil
}

// Start marks a leased job running.
func (s *Store) Start(ctx context.Context, l *Lease) error {
	err := s.fenced(ctx, `UPDATE jobs SET state = 'running', started_ms = ? WHERE id = ? AND lease_token = ? AND state = 'leased'`,
		ms(s.now()), l.ID, l.Token)
	if err != nil {
		return fmt.Errorf("start job %d: %w", l.ID, err)
	}
	l.State = Running
	return nil
}

// Heartbeat extends the lease to now+ttl.
func (s *Store) Heartbeat(ctx context.Context, l *Lease, ttl time.Duration) error {
	until := ms(s.now()) + ttl.Milliseconds()
	err := s.fenced(ctx, `UPDATE jobs SET lease_until_ms = ? WHERE id = ? AND lease_token = ? AND state IN ('leased','running')`,
		until, l.ID, l.Token)
	if err != nil {
		return fmt.Errorf("heartbeat job %d: %w", l.ID, err)
	}
	l.Until = time.UnixMilli(until)
	return nil
}

// Finish ends a held job in a final state and charges the GPU time it used
// to its user's fair share, in one transaction.
func (s *Store) Finish(ctx context.Context, l *Lease, st State, gpuTime time.Duration, errText string) error {
	switch st {
	case Succeeded, Failed, TimedOut, Cancelled:
	default:
		return fmt.Errorf("finish job %d: %q is not a final state", l.ID, st)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("finish job %d: %w", l.ID, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, finished_ms = ?, error = ?, lease_token = NULL, lease_until_ms = NULL
		WHERE id = ? AND lease_token = ? AND state IN ('leased','running')`, st, ms(s.now()), errText, l.ID, l.Token)
	if err == nil {
		err = oneRow(res)
	}
	if err != nil {
		return fmt.Errorf("finish job %d: %w", l.ID, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO usage (user, gpu_ms) VALUES (?, ?)
		ON CONFLICT (user) DO UPDATE SET gpu_ms = gpu_ms + excluded.gpu_ms`, l.User, gpuTime.Milliseconds()); err != nil {
		return fmt.Errorf("finish job %d: charge %s: %w", l.ID, l.User, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("finish job %d: %w", l.ID, err)
	}
	l.State = st
	return nil
}

// Retry gives a held job back to the queue after an infrastructure failure
// (not a wrong answer), to run again after delay; once its attempts are
// spent it fails instead. It reports whether the job was requeued.
func (s *Store) Retry(ctx context.Context, l *Lease, delay time.Duration, errText string) (bool, error) {
	now := ms(s.now())
	var st State
	err := s.db.QueryRowContext(ctx, `UPDATE jobs SET
			state = CASE WHEN attempts < max_attempts THEN 'queued' ELSE 'failed' END,
			run_after_ms = ?, error = ?, lease_token = NULL, lease_until_ms = NULL,
			finished_ms = CASE WHEN attempts < max_attempts THEN NULL ELSE ? END
		WHERE id = ? AND lease_token = ? AND state IN ('leased','running') RETURNING state`,
		now+delay.Milliseconds(), errText, now, l.ID, l.Token).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("retry job %d: %w", l.ID, ErrLeaseLost)
	}
	if err != nil {
		return false, fmt.Errorf("retry job %d: %w", l.ID, err)
	}
	l.State = st
	return st == Queued, nil
}

// Release gives a held job back to the queue without spending an attempt:
// the daemon is shutting down, and the job did nothing wrong.
func (s *Store) Release(ctx context.Context, l *Lease, why string) error {
	err := s.fenced(ctx, `UPDATE jobs SET state = 'queued', attempts = MAX(attempts - 1, 0), error = ?,
			lease_token = NULL, lease_until_ms = NULL, started_ms = NULL
		WHERE id = ? AND lease_token = ? AND state IN ('leased','running')`, why, l.ID, l.Token)
	if err != nil {
		return fmt.Errorf("release job %d: %w", l.ID, err)
	}
	l.State = Queued
	return nil
}

// Cancel cancels a job that has not finished. A queued job is cancelled at
// once; a held one too, and its holder's next fenced update fails with
// ErrLeaseLost, which is its signal to stop the run.
func (s *Store) Cancel(ctx context.Context, id int64) error {
	res, err := s.db.ExecContext(ctx, `UPDATE jobs SET state = 'cancelled', finished_ms = ?, lease_token = NULL, lease_until_ms = NULL
		WHERE id = ? AND state IN ('queued','leased','running')`, ms(s.now()), id)
	if err == nil {
		err = oneRow(res)
	}
	if errors.Is(err, ErrLeaseLost) {
		if _, gerr := s.Get(ctx, id); gerr != nil {
			return fmt.Errorf("cancel job %d: %w", id, gerr)
		}
		return nil // already final: cancelling is idempotent
	}
	if err != nil {
		return fmt.Errorf("cancel job %d: %w", id, err)
	}
	return nil
}

// Reap requeues (or, with no attempts left, fails) every held job whose
// lease has expired or belongs to a boot other than boot: their holder is
// gone. It returns how many jobs it touched.
func (s *Store) Reap(ctx context.Context, boot string) (int, error) {
	now := ms(s.now())
	res, err := s.db.ExecContext(ctx, `UPDATE jobs SET
			state = CASE WHEN attempts < max_attempts THEN 'queued' ELSE 'failed' END,
			error = CASE WHEN attempts < max_attempts THEN error ELSE 'lease expired on the last attempt' END,
			finished_ms = CASE WHEN attempts < max_attempts THEN NULL ELSE ? END,
			lease_token = NULL, lease_until_ms = NULL
		WHERE state IN ('leased','running') AND (lease_until_ms < ? OR lease_boot <> ?)`, now, now, boot)
	if err != nil {
		return 0, fmt.Errorf("reap leases: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("reap leases: %w", err)
	}
	return int(n), nil
}

// Get returns one job.
func (s *Store) Get(ctx context.Context, id int64) (*Job, error) {
	var j Job
	err := scanJob(s.db.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id), &j)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return &j, nil
}

// jobColumns are the columns scanJob reads, in its order.
const jobColumns = `id, class, user, gpu_type, payload, state, attempts, max_attempts, created_ms, started_ms, finished_ms, error, key, gpus`

func scanJob(row interface{ Scan(...any) error }, j *Job) error {
	var created int64
	var started, finished sql.NullInt64
	var key sql.NullString
	if err := row.Scan(&j.ID, &j.Class, &j.User, &j.GPUType, &j.Payload, &j.State, &j.Attempts, &j.MaxAttempts,
		&created, &started, &finished, &j.Error, &key, &j.GPUs); err != nil {
		return err
	}
	j.Created = time.UnixMilli(created)
	j.Started, j.Finished = fromMS(started), fromMS(finished)
	j.Key = key.String
	return nil
}

func fromMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64)
}

func (s *Store) fenced(ctx context.Context, query string, args ...any) error {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	return oneRow(res)
}

func oneRow(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return ErrLeaseLost
	}
	return nil
}

func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
