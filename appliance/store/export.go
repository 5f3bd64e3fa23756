package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"

	"kernelbox/appliance/api"
)

// ExportFilter narrows an export; zero fields match every submission.
type ExportFilter struct {
	Passing bool // only submissions that passed
	Ranked  bool // only ranked ones (leaderboard mode)
}

// ExportRow is one submission as the dataset export reads it: the
// submission, its code, and its public run's score error and report
// (where the per-benchmark means are).
type ExportRow struct {
	*Submission
	// Problem is the leaderboard's problem directory, as stored.
	ProblemDir string
	Code       []byte
	ScoreErr   *float64
	Report     []byte
}

// exportBatch is how many submissions one read holds: the export walks the
// table a batch at a time, so neither every submission's code is in memory
// at once nor the daemon's one connection held while a slow client reads.
const exportBatch = 32

// Export calls fn with every submission that f lets through, oldest first.
func (s *Store) Export(ctx context.Context, f ExportFilter, fn func(*ExportRow) error) error {
	where := []string{"s.id > ?"}
	if f.Passing {
		where = append(where, "s.passed = 1")
	}
	if f.Ranked {
		where = append(where, "s.category = '"+api.CategoryRanked+"'")
	}
	q := `SELECT ` + submissionColumns + `, l.problem_dir, c.data, s.score_err,
		COALESCE((SELECT r.report FROM runs r WHERE r.submission_id = s.id AND r.secret = 0 ORDER BY r.id LIMIT 1), '')` +
		submissionFrom + ` JOIN code c ON c.sha256 = s.code_sha256 WHERE ` + strings.Join(where, " AND ") + ` ORDER BY s.id LIMIT ?`
	after := int64(0)
	for {
		batch, err := s.exportBatch(ctx, q, after)
		if err != nil {
			return fmt.Errorf("export submissions after %d: %w", after, err)
		}
		for _, row := range batch {
			if err := fn(row); err != nil {
				return err
			}
			after = row.ID
		}
		if len(batch) < exportBatch {
			return nil
		}
	}
}

func (s *Store) exportBatch(ctx context.Context, q string, after int64) ([]*ExportRow, error) {
	rows, err := s.db.QueryContext(ctx, q, after, exportBatch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*ExportRow
	for rows.Next() {
		var r ExportRow
		var scoreErr sql.NullFloat64
		var report string
		sub, err := scanSubmission(scanFunc(func(dest ...any) error {
			return rows.Scan(append(dest, &r.ProblemDir, &r.Code, &scoreErr, &report)...)
		}))
		if err != nil {
			return nil, err
		}
		// As Code does: damaged code is never handed out as a contestant's.
		if sum := sha256.Sum256(r.Code); hex.EncodeToString(sum[:]) != sub.SHA256 {
			return nil, fmt.Errorf("code of submission %d: %w: its %d bytes hash to %x", sub.ID, ErrDamaged, len(r.Code), sum[:8])
		}
		r.Submission = sub
		if scoreErr.Valid {
			r.ScoreErr = &scoreErr.Float64
		}
		r.Report = []byte(report)
		out = append(out, &r)
	}
	return out, rows.Err()
}

// scanFunc lets scanSubmission read a row with more columns than its own.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }
