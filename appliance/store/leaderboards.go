package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"kernelbox/appliance/api"
)

// Leaderboard is one problem offered for ranking: the API's view plus
// what stays on the server (its key, its problem's directory, the seed of
// its secret runs).
// Its own fields never reach the wire (json:"-"): handlers answer with the
// embedded api.Leaderboard.
type Leaderboard struct {
	api.Leaderboard
	ID         int64  `json:"-"`
	ProblemDir string `json:"-"`
	SecretSeed int64  `json:"-"`
}

// Ended reports whether the deadline has passed at now.
func (l *Leaderboard) Ended(now time.Time) bool {
	return !l.Deadline.IsZero() && !now.Before(l.Deadline)
}

// OffersGPU reports whether the leaderboard ranks on gpuType.
func (l *Leaderboard) OffersGPU(gpuType string) bool {
	for _, g := range l.GPUs {
		if g == gpuType {
			return true
		}
	}
	return false
}

// LeaderboardSpec is a leaderboard as a problem load describes it.
type LeaderboardSpec struct {
	Name        string
	Description string
	Lang        string
	RankingBy   string
	Deadline    time.Time
	GPUs        []string
	ProblemDir  string
}

// PutLeaderboard creates the leaderboard or, when it exists, replaces its
// problem, description, deadline and GPU types. Its secret seed,
// visibility, rate limits and submissions stay: reloading a fixed problem
// must not reset a running competition.
func (s *Store) PutLeaderboard(ctx context.Context, spec LeaderboardSpec) (created bool, err error) {
	if err := validName("leaderboard", spec.Name); err != nil {
		return false, err
	}
	if len(spec.GPUs) == 0 {
		return false, api.Errorf(api.CodeInvalid, "leaderboard %s: no GPU types", spec.Name)
	}
	var seedBytes [8]byte
	if _, err := rand.Read(seedBytes[:]); err != nil {
		return false, err
	}
	// A positive 31-bit seed: the harness adds it to each case's seed.
	seed := int64(binary.LittleEndian.Uint32(seedBytes[:]) >> 1)
	now := ms(s.now())
	err = s.update(ctx, "put leaderboard "+spec.Name, func(tx *txn) error {
		var id int64
		err := tx.QueryRowContext(ctx, `SELECT id FROM leaderboards WHERE name = ?`, spec.Name).Scan(&id)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			created = true
			err = tx.QueryRowContext(ctx, `INSERT INTO leaderboards (name, problem_dir, description, lang, ranking_by, deadline_ms, secret_seed, created_ms, updated_ms)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
				spec.Name, spec.ProblemDir, spec.Description, spec.Lang, spec.RankingBy, nullMS(spec.Deadline), seed, now, now).Scan(&id)
		case err == nil:
			_, err = tx.ExecContext(ctx, `UPDATE leaderboards SET problem_dir = ?, description = ?, lang = ?, ranking_by = ?, deadline_ms = ?, updated_ms = ? WHERE id = ?`,
				spec.ProblemDir, spec.Description, spec.Lang, spec.RankingBy, nullMS(spec.Deadline), now, id)
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM leaderboard_gpus WHERE leaderboard_id = ?`, id); err != nil {
			return err
		}
		for _, g := range spec.GPUs {
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO leaderboard_gpus (leaderboard_id, gpu_type) VALUES (?, ?)`, id, g); err != nil {
				return err
			}
		}
		return appendEvent(ctx, tx, s.now(), 0, 0, api.LeaderboardPut{Name: spec.Name, Created: created, GPUs: spec.GPUs})
	})
	return created, err
}

const leaderboardColumns = `id, name, problem_dir, description, lang, ranking_by, deadline_ms, visibility, secret_seed, created_ms, updated_ms`

func scanLeaderboard(row interface{ Scan(...any) error }) (*Leaderboard, error) {
	var l Leaderboard
	var deadline sql.NullInt64
	var created, updated int64
	if err := row.Scan(&l.ID, &l.Name, &l.ProblemDir, &l.Description, &l.Lang, &l.RankingBy, &deadline, &l.Visibility,
		&l.SecretSeed, &created, &updated); err != nil {
		return nil, err
	}
	l.Deadline = fromMS(deadline)
	l.Created, l.Updated = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return &l, nil
}

func leaderboardByName(ctx context.Context, q queryer, name string) (*Leaderboard, error) {
	l, err := scanLeaderboard(q.QueryRowContext(ctx, `SELECT `+leaderboardColumns+` FROM leaderboards WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, api.Errorf(api.CodeNotFound, "no leaderboard %s (`kernelbox leaderboards` lists them)", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get leaderboard %s: %w", name, err)
	}
	if err := fillLeaderboard(ctx, q, l); err != nil {
		return nil, fmt.Errorf("get leaderboard %s: %w", name, err)
	}
	return l, nil
}

func fillLeaderboard(ctx context.Context, q queryer, l *Leaderboard) error {
	rows, err := q.QueryContext(ctx, `SELECT gpu_type FROM leaderboard_gpus WHERE leaderboard_id = ? ORDER BY gpu_type`, l.ID)
	if err != nil {
		return err
	}
	l.GPUs = []string{}
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			rows.Close()
			return err
		}
		l.GPUs = append(l.GPUs, g)
	}
	rows.Close()
	rows, err = q.QueryContext(ctx, `SELECT category, per_hour FROM rate_limits WHERE leaderboard_id = ?`, l.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	l.RateLimits = map[string]int{}
	for rows.Next() {
		var c string
		var n int
		if err := rows.Scan(&c, &n); err != nil {
			return err
		}
		l.RateLimits[c] = n
	}
	return rows.Err()
}

// Leaderboard returns the named leaderboard.
func (s *Store) Leaderboard(ctx context.Context, name string) (*Leaderboard, error) {
	return leaderboardByName(ctx, s.db, name)
}

// Leaderboards lists every leaderboard by name.
func (s *Store) Leaderboards(ctx context.Context) ([]*Leaderboard, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+leaderboardColumns+` FROM leaderboards ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list leaderboards: %w", err)
	}
	var out []*Leaderboard
	for rows.Next() {
		l, err := scanLeaderboard(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("list leaderboards: %w", err)
		}
		out = append(out, l)
	}
	rows.Close()
	for _, l := range out {
		if err := fillLeaderboard(ctx, s.db, l); err != nil {
			return nil, fmt.Errorf("list leaderboards: %w", err)
		}
	}
	return out, nil
}

// ChangeLeaderboard applies an organiser's edit.
func (s *Store) ChangeLeaderboard(ctx context.Context, name string, ch api.LeaderboardChange) (*Leaderboard, error) {
	if ch.Visibility != nil && *ch.Visibility != api.VisibilityOpen && *ch.Visibility != api.VisibilityClosed {
		return nil, api.Errorf(api.CodeInvalid, "visibility %q: want open or closed", *ch.Visibility)
	}
	for c := range ch.RateLimits {
		if c != api.CategoryTest && c != api.CategoryRanked {
			return nil, api.Errorf(api.CodeInvalid, "rate limit category %q: want test or ranked", c)
		}
	}
	err := s.update(ctx, "change leaderboard "+name, func(tx *txn) error {
		l, err := leaderboardByName(ctx, tx, name)
		if err != nil {
			return err
		}
		if ch.Visibility != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE leaderboards SET visibility = ? WHERE id = ?`, *ch.Visibility, l.ID); err != nil {
				return err
			}
		}
		if ch.Deadline != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE leaderboards SET deadline_ms = ? WHERE id = ?`, nullMS(*ch.Deadline), l.ID); err != nil {
				return err
			}
		}
		for c, n := range ch.RateLimits {
			q := `INSERT INTO rate_limits (leaderboard_id, category, per_hour) VALUES (?, ?, ?)
				ON CONFLICT (leaderboard_id, category) DO UPDATE SET per_hour = excluded.per_hour`
			args := []any{l.ID, c, n}
			if n < 0 {
				q, args = `DELETE FROM rate_limits WHERE leaderboard_id = ? AND category = ?`, args[:2]
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE leaderboards SET updated_ms = ? WHERE id = ?`, ms(s.now()), l.ID); err != nil {
			return err
		}
		return appendEvent(ctx, tx, s.now(), 0, 0, api.LeaderboardChanged{Name: name, Change: ch})
	})
	if err != nil {
		return nil, err
	}
	return s.Leaderboard(ctx, name)
}

// IsMember reports whether the user may submit to a closed leaderboard.
func (s *Store) IsMember(ctx context.Context, lbID, userID int64) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM members WHERE leaderboard_id = ? AND user_id = ?`, lbID, userID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("membership: %w", err)
	}
	return n > 0, nil
}

// api.Ranking returns the per-user best of a leaderboard on one GPU type. Only
// passed leaderboard-mode submissions whose secret twin also passed have a
// score; hacked ones, flagged ones awaiting review and banned users are
// left out. Equal scores share a
// rank, and the earlier submission is a user's best among equal ones.
func (s *Store) Ranking(ctx context.Context, lbID int64, gpuType string) ([]api.RankRow, error) {
	rows, err := s.db.QueryContext(ctx, `WITH best AS (
			SELECT s.id, s.user_id, s.score, s.created_ms,
			       ROW_NUMBER() OVER (PARTITION BY s.user_id ORDER BY s.score, s.id) AS n
			FROM submissions s JOIN users u ON u.id = s.user_id
			WHERE s.leaderboard_id = ? AND s.gpu_type = ? AND s.score IS NOT NULL AND s.passed = 1
			  AND s.hacked = 0 AND s.review != 'flagged' AND u.banned = 0)
		SELECT RANK() OVER (ORDER BY b.score), u.name, b.score, b.id, b.created_ms
		FROM best b JOIN users u ON u.id = b.user_id WHERE b.n = 1
		ORDER BY b.score, b.id`, lbID, gpuType)
	if err != nil {
		return nil, fmt.Errorf("ranking: %w", err)
	}
	defer rows.Close()
	out := []api.RankRow{}
	for rows.Next() {
		var r api.RankRow
		var at int64
		if err := rows.Scan(&r.Rank, &r.User, &r.Score, &r.Submission, &at); err != nil {
			return nil, fmt.Errorf("ranking: %w", err)
		}
		r.At = time.UnixMilli(at).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}
