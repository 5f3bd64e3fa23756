package store

import (
	"context"
	"time"

	"kernelbox/appliance/api"
)

// Stats counts what the box has done since since (the zero time: ever),
// for `kernelbox admin stats`: the organiser's view of a contest's
// activity, as KernelBot's /admin/stats.
func (s *Store) Stats(ctx context.Context, since time.Time) (api.Stats, error) {
	st := api.Stats{Since: since, ByStatus: map[string]int{}, ByMode: map[string]int{}, ByLeaderboard: map[string]int{},
		GPUSeconds: map[string]float64{}}
	from := ms(since)
	if since.IsZero() {
		from = 0
	}
	err := s.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM users WHERE banned != 0),
		(SELECT count(DISTINCT user_id) FROM submissions WHERE created_ms >= ?),
		(SELECT count(*) FROM submissions WHERE created_ms >= ?),
		(SELECT count(*) FROM submissions WHERE created_ms >= ? AND review = 'flagged'),
		(SELECT count(*) FROM submissions WHERE created_ms >= ? AND hacked != 0)`, from, from, from, from).
		Scan(&st.Users, &st.Banned, &st.ActiveUsers, &st.Submissions, &st.Flagged, &st.Hacked)
	if err != nil {
		return st, err
	}
	for _, q := range []struct {
		sql string
		to  map[string]int
	}{
		{`SELECT status, count(*) FROM submissions WHERE created_ms >= ? GROUP BY status`, st.ByStatus},
		{`SELECT mode, count(*) FROM submissions WHERE created_ms >= ? GROUP BY mode`, st.ByMode},
		{`SELECT l.name, count(*) FROM submissions s JOIN leaderboards l ON l.id = s.leaderboard_id WHERE s.created_ms >= ? GROUP BY l.name`, st.ByLeaderboard},
	} {
		if err := countInto(ctx, s, q.sql, from, q.to); err != nil {
			return st, err
		}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT gpu_type, sum(finished_ms - started_ms) FROM runs
		WHERE started_ms >= ? AND finished_ms IS NOT NULL GROUP BY gpu_type`, from)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var g string
		var msSum int64
		if err := rows.Scan(&g, &msSum); err != nil {
			return st, err
		}
		st.GPUSeconds[g] = float64(msSum) / 1000
	}
	return st, rows.Err()
}

func countInto(ctx context.Context, s *Store, query string, from int64, to map[string]int) error {
	rows, err := s.db.QueryContext(ctx, query, from)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		to[k] = n
	}
	return rows.Err()
}
