package queue

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/mattn/go-sqlite3" // the SQLite driver, registered as "sqlite3"
)

//go:embed migrations/*.sql
var migrations embed.FS

// JobTables are the queue's migrations: tracked as the "queue" component
// of the database they live in, beside the caller's own tables. A caller
// sharing the file migrates them with its own in one Migrate.
var JobTables = Migrations{Component: "queue", FS: migrations, Dir: "migrations", Legacy: "jobs"}

// Store is the queue: its tables in a SQLite database that the caller may
// share, so that the caller's rows and its jobs change in one transaction
// (EnqueueTx), the way River's InsertTx does.
type Store struct {
	db  *sql.DB
	own bool // Open made the db, so Close closes it
	now func() time.Time
}

// Options tune a Store; the zero value is usable.
type Options struct {
	// Now is the clock; time.Now when nil. Tests inject their own.
	Now func() time.Time
}

// New returns the queue over the job tables of db (OpenDB's), which the
// caller has brought to this binary's schema with Migrate (JobTables
// among its components). Closing db is the caller's.
func New(db *sql.DB, opt Options) *Store {
	s := &Store{db: db, now: opt.Now}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Open opens (creating if needed) a database file of the queue's own, for
// tests and tools; the daemon shares one file with its store (OpenDB, New).
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	db, err := OpenDB(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, db, JobTables); err != nil {
		db.Close()
		return nil, fmt.Errorf("open queue: %w", err)
	}
	s := New(db, opt)
	s.own = true
	return s, nil
}

// Close closes the database when Open made it.
func (s *Store) Close() error {
	if !s.own {
		return nil
	}
	return s.db.Close()
}

// OpenDB opens the SQLite database file at path the way kernelbox keeps
// its state: the queue's tables and the daemon's, in one file.
//
// The file and its WAL and shared-memory files are the owner's alone
// (0600), whatever the umask: they hold every submission's code and the
// tokens' hashes. SQLite gives the two files it makes the database's mode.
func OpenDB(ctx context.Context, path string) (*sql.DB, error) {
	if err := ownerOnly(path); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
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
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// ownerOnly makes the database file if it is missing and sets it and
// the WAL and shared-memory files left beside it to 0600.
func ownerOnly(path string) error {
	// A link is followed, as SQLite follows it: an operator may have
	// moved the database to another disk that way.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	err = f.Chmod(0o600)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	for _, side := range []string{"-wal", "-shm"} {
		if cerr := os.Chmod(path+side, 0o600); cerr != nil && !errors.Is(cerr, fs.ErrNotExist) && err == nil {
			err = cerr
		}
	}
	return err
}

// Migrations are one component's numbered schema changes (NNNN_name.sql
// in Dir of FS), applied in order, each in a transaction with the record
// that it was.
type Migrations struct {
	// Component names whose they are ("queue", "appliance"): several share
	// a database, each with its own version.
	Component string
	FS        fs.FS
	Dir       string
	// Legacy is a table the component's first migration makes. A file
	// written before versions were kept per component has it, and its
	// PRAGMA user_version is this component's version.
	Legacy string
}

// Migrate applies the migrations db has not seen yet, for each component
// sharing the file. Every component's version is read (and, for a file of
// the one-component era, adopted from its user_version) before any is
// changed; then the file's user_version is set to say that versions are
// kept per component.
func Migrate(ctx context.Context, db *sql.DB, ms ...Migrations) error {
	have := make([]int, len(ms))
	for i, m := range ms {
		v, err := schemaVersion(ctx, db, m)
		if err != nil {
			return err
		}
		have[i] = v
	}
	for i, m := range ms {
		if err := migrateFrom(ctx, db, m, have[i]); err != nil {
			return err
		}
	}
	// Binaries of the one-component era read user_version as their own
	// schema: one above anything they know makes them refuse this file
	// instead of running on half of it.
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", perComponentVersion)); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return nil
}

// perComponentVersion is the PRAGMA user_version of a file whose versions
// are kept per component.
const perComponentVersion = 1000

func migrateFrom(ctx context.Context, db *sql.DB, m Migrations, have int) error {
	names, err := fs.Glob(m.FS, m.Dir+"/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	newest := 0
	for _, name := range names {
		base := strings.TrimPrefix(name, m.Dir+"/")
		n, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("%s migration %s: name does not start with a number", m.Component, base)
		}
		newest = max(newest, n)
		if n <= have {
			continue
		}
		body, err := fs.ReadFile(m.FS, name)
		if err != nil {
			return err
		}
		if err := applyMigration(ctx, db, m.Component, n, string(body)); err != nil {
			return fmt.Errorf("%s migration %s: %w", m.Component, base, err)
		}
		have = n
	}
	if have > newest {
		return fmt.Errorf("%s schema version %d is newer than this binary's %d: %w", m.Component, have, newest, ErrSchemaTooNew)
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, component string, n int, body string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return err
	}
	if err := SetSchemaVersion(ctx, tx, component, n); err != nil {
		return err
	}
	return tx.Commit()
}

// schemaVersions records each component's version in the database.
const schemaVersions = `CREATE TABLE IF NOT EXISTS schema_versions (
	component TEXT PRIMARY KEY,
	version   INTEGER NOT NULL
)`

// schemaVersion is the component's version in db: its row, or for a file
// of the one-component era its user_version, or 0.
func schemaVersion(ctx context.Context, db *sql.DB, m Migrations) (int, error) {
	if _, err := db.ExecContext(ctx, schemaVersions); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	var v int
	err := db.QueryRowContext(ctx, `SELECT version FROM schema_versions WHERE component = ?`, m.Component).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if m.Legacy == "" {
		return 0, nil
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, m.Legacy).Scan(&n); err != nil || n == 0 {
		return 0, err
	}
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if v >= perComponentVersion {
		return 0, fmt.Errorf("%s schema: its tables are there but its version is not: the file is damaged", m.Component)
	}
	// Record it now: later the file's user_version means no component.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if err := SetSchemaVersion(ctx, tx, m.Component, v); err != nil {
		return 0, err
	}
	return v, tx.Commit()
}

// SetSchemaVersion records, in tx, that component is at version v.
func SetSchemaVersion(ctx context.Context, tx *sql.Tx, component string, v int) error {
	if _, err := tx.ExecContext(ctx, schemaVersions); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO schema_versions (component, version) VALUES (?, ?)
		ON CONFLICT (component) DO UPDATE SET version = excluded.version`, component, v)
	return err
}

func ms(t time.Time) int64 { return t.UnixMilli() }
