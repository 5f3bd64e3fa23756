package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"kernelbox/appliance/api"
)

// Snapshot writes a consistent copy of the database at src to dst (which
// must not exist) while the daemon keeps writing to it.
//
// It runs VACUUM INTO on a connection of its own, read-only: the copy is
// one read transaction's view (WAL readers do not block the writer), so
// the daemon's single connection is never held for the copy's length, and
// the copy comes out compacted, without the WAL a page copy would need.
func Snapshot(ctx context.Context, src, dst string) error {
	db, err := openReadOnly(src)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", src, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return fmt.Errorf("snapshot %s: %w", src, err)
	}
	return nil
}

// Summary is what a database file holds, in numbers: enough to say what
// a backup has and to compare two copies of one store.
type Summary = api.StoreSummary

// ErrNotStore is a file that is not a sound kernelbox database.
var ErrNotStore = errors.New("not a sound kernelbox database")

// Inspect checks the database file at path (PRAGMA integrity_check) and
// summarises it, without changing it.
func Inspect(ctx context.Context, path string) (Summary, error) {
	var s Summary
	db, err := openReadOnly(path)
	if err != nil {
		return s, fmt.Errorf("inspect %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return s, fmt.Errorf("inspect %s: %w: %w", path, ErrNotStore, err)
	}
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return s, fmt.Errorf("inspect %s: %w", path, err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("inspect %s: %w: %w", path, ErrNotStore, err)
	}
	if len(problems) > 0 {
		if len(problems) > 5 {
			problems = append(problems[:5], "...")
		}
		return s, fmt.Errorf("inspect %s: %w: integrity_check: %s", path, ErrNotStore, strings.Join(problems, "; "))
	}
	err = db.QueryRowContext(ctx, `SELECT (SELECT value FROM meta WHERE key = 'store_id'),
		(SELECT last FROM id_floors WHERE name = 'submissions'), (SELECT last FROM id_floors WHERE name = 'runs'),
		(SELECT count(*) FROM users), (SELECT count(*) FROM leaderboards), (SELECT count(*) FROM submissions)`).
		Scan(&s.StoreID, &s.Submissions, &s.Runs, &s.Users, &s.Leaderboards, &s.Count)
	if err != nil {
		return s, fmt.Errorf("inspect %s: %w (no store id or id floors: %w)", path, ErrNotStore, err)
	}
	return s, nil
}

// openReadOnly opens one read-only connection to path; a missing file is
// an error, not a new database.
func openReadOnly(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_busy_timeout", "5000")
	db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
