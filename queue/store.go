package queue

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // the SQLite driver, registered as "sqlite3"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the queue's SQLite database.
type Store struct {
	db  *sql.DB
	now func() time.Time
}

// Options tune a Store; the zero value is usable.
type Options struct {
	// Now is the clock; time.Now when nil. Tests inject their own.
	Now func() time.Time
}

// Open opens (creating if needed) the queue database at path and applies
// the embedded migrations that it has not seen yet.
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	db, err := OpenSQLite(ctx, path, migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("open queue: %w", err)
	}
	s := &Store{db: db, now: opt.Now}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// OpenSQLite opens the SQLite database at path the way every kernelbox
// store does (the queue here, the appliance's users and leaderboards in a
// file of their own), and applies the migrations in dir of fsys that its
// PRAGMA user_version has not seen. It lives here because the queue was
// the first store; the appliance imports the queue anyway.
func OpenSQLite(ctx context.Context, path string, fsys fs.FS, dir string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	// FULL: an accepted submission survives a power cut, not only a crash
	// of the daemon.
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "on")
	q.Set("_busy_timeout", "5000")
	// Every transaction takes the write lock at BEGIN, so a read and the
	// update that depends on it cannot interleave with another writer.
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// One connection: every statement is serialised through SQLite's single
	// writer without busy retries between our own callers.
	db.SetMaxOpenConns(1)
	if err := migrate(ctx, db, fsys, dir); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// migrate applies dir/NNNN_*.sql above PRAGMA user_version, each in its own
// transaction together with the version bump.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS, dir string) error {
	var have int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&have); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	newest := 0
	for _, name := range names {
		base := strings.TrimPrefix(name, dir+"/")
		n, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migration %s: name does not start with a number", base)
		}
		newest = max(newest, n)
		if n <= have {
			continue
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", n)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", base, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: %w", base, err)
		}
		have = n
	}
	if have > newest {
		return fmt.Errorf("schema version %d is newer than this binary's %d: %w", have, newest, ErrSchemaTooNew)
	}
	return nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }
