package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Load is what one user has in the queue.
type Load struct {
	Queued  int // waiting
	Running int // leased or running
}

// UserLoad counts the user's unfinished jobs.
func (s *Store) UserLoad(ctx context.Context, user string) (Load, error) {
	return userLoad(ctx, s.db, user)
}

// UserLoadTx counts them inside tx: the appliance checks its cap on
// queued jobs in the transaction that enqueues a submission's, so two
// submissions at once cannot both pass it.
func (s *Store) UserLoadTx(ctx context.Context, tx *sql.Tx, user string) (Load, error) {
	return userLoad(ctx, tx, user)
}

func userLoad(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, user string) (Load, error) {
	var l Load
	err := q.QueryRowContext(ctx, `SELECT
			COALESCE(SUM(state = 'queued'), 0), COALESCE(SUM(state IN ('leased','running')), 0)
		FROM jobs WHERE user = ? AND state IN ('queued','leased','running')`, user).Scan(&l.Queued, &l.Running)
	if err != nil {
		return Load{}, fmt.Errorf("load of %s: %w", user, err)
	}
	return l, nil
}

// Position returns how many queued jobs of the same GPU type Claim would
// pick before job id, given the same ageing credit: 0 means it is next.
// A job that is not queued has no position, and ok is false.
func (s *Store) Position(ctx context.Context, id int64, agePerSecond int64) (pos int, ok bool, err error) {
	now := ms(s.now())
	err = s.db.QueryRowContext(ctx, `WITH ranked AS (
			SELECT j.id, j.gpu_type, j.class, j.run_after_ms,
			       COALESCE(u.gpu_ms, 0) - (? - j.created_ms) / 1000 * ? AS share
			FROM jobs j LEFT JOIN usage u ON u.user = j.user
			WHERE j.state = 'queued')
		SELECT (SELECT COUNT(*) FROM ranked o WHERE o.gpu_type = me.gpu_type AND o.run_after_ms <= ?
			AND (o.class < me.class OR (o.class = me.class AND (o.share < me.share OR (o.share = me.share AND o.id < me.id)))))
		FROM ranked me WHERE me.id = ?`, now, agePerSecond, now, id).Scan(&pos)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("position of job %d: %w", id, err)
	}
	return pos, true, nil
}

// MeanRunTime is the mean wall time, start to finish, of the last n jobs of
// gpuType that succeeded; zero when none has yet. It feeds the queue's ETA.
func (s *Store) MeanRunTime(ctx context.Context, gpuType string, n int) (time.Duration, error) {
	var mean sql.NullFloat64
	err := s.db.QueryRowContext(ctx, `SELECT AVG(finished_ms - started_ms) FROM (
			SELECT finished_ms, started_ms FROM jobs
			WHERE gpu_type = ? AND state = 'succeeded' AND started_ms IS NOT NULL
			ORDER BY finished_ms DESC LIMIT ?)`, gpuType, n).Scan(&mean)
	if err != nil {
		return 0, fmt.Errorf("mean run time on %s: %w", gpuType, err)
	}
	return time.Duration(mean.Float64 * float64(time.Millisecond)), nil
}

// Running counts held jobs per GPU type.
func (s *Store) Running(ctx context.Context) (map[string]int, error) {
	return s.countBy(ctx, `SELECT gpu_type, COUNT(*) FROM jobs WHERE state IN ('leased','running') GROUP BY gpu_type`)
}

// Depth counts queued jobs per GPU type.
func (s *Store) Depth(ctx context.Context) (map[string]int, error) {
	return s.countBy(ctx, `SELECT gpu_type, COUNT(*) FROM jobs WHERE state = 'queued' GROUP BY gpu_type`)
}

func (s *Store) countBy(ctx context.Context, query string) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("queue counts: %w", err)
	}
	defer rows.Close()
	d := map[string]int{}
	for rows.Next() {
		var g string
		var n int
		if err := rows.Scan(&g, &n); err != nil {
			return nil, fmt.Errorf("queue counts: %w", err)
		}
		d[g] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue counts: %w", err)
	}
	return d, nil
}

// Count is how many unfinished jobs of one GPU type and class are in one
// state.
type Count struct {
	GPUType string
	Class   Class
	State   State
	N       int
}

// Counts counts the unfinished jobs (queued, leased, running) by GPU
// type, class and state: the metrics' queue depths.
func (s *Store) Counts(ctx context.Context) ([]Count, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT gpu_type, class, state, COUNT(*) FROM jobs
		WHERE state IN ('queued','leased','running') GROUP BY gpu_type, class, state`)
	if err != nil {
		return nil, fmt.Errorf("queue counts: %w", err)
	}
	defer rows.Close()
	var out []Count
	for rows.Next() {
		var c Count
		if err := rows.Scan(&c.GPUType, &c.Class, &c.State, &c.N); err != nil {
			return nil, fmt.Errorf("queue counts: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue counts: %w", err)
	}
	return out, nil
}
