package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"kernelbox/problems"
	"kernelbox/queue"
)

// MergeQueueFile merges the queue's file of a data directory of the
// two-file era, which kept the jobs in queue.db beside kernelbox.db, with
// nothing lost and the old file left as it was: a copy of it (with its
// WAL) is brought to this binary's queue schema, the copy's rows are
// copied in one transaction that also records the merge, and the old file
// is then kept, untouched, as queue.db.merged (its WAL beside it), which
// the binary that wrote it can still open. A crash between the commit
// and the rename is harmless: the record says the copy is done. An old
// file beside a store that already holds jobs is refused before anything
// is changed.
func MergeQueueFile(ctx context.Context, st *Store, path string, log *slog.Logger) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("merge %s: %w", path, err)
	}
	var done, have int
	if err := st.db.QueryRowContext(ctx, `SELECT count(*) FROM schema_versions WHERE component = ?`, mergedMarker).Scan(&done); err != nil {
		return fmt.Errorf("merge %s: %w", path, err)
	}
	if done == 0 {
		if err := st.db.QueryRowContext(ctx, `SELECT count(*) FROM jobs`).Scan(&have); err != nil {
			return fmt.Errorf("merge %s: %w", path, err)
		}
		if have > 0 {
			return fmt.Errorf("merge %s: kernelbox.db holds %d jobs already, and %s holds the old ones: move one of them away by hand", path, have, path)
		}
		n, err := mergeCopy(ctx, st.db, path)
		if err != nil {
			return fmt.Errorf("merge %s into the store: %w", path, err)
		}
		log.Warn("merged the queue's old database file into kernelbox.db", "file", path, "jobs", n, "kept", path+".merged")
	}
	if err := os.Remove(path + "-shm"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("merge %s: %w", path, err)
	}
	if err := os.Rename(path+"-wal", path+".merged-wal"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("merge %s: %w", path, err)
	}
	if err := os.Rename(path, path+".merged"); err != nil {
		return fmt.Errorf("merge %s: %w", path, err)
	}
	return nil
}

// mergeCopy copies the old file and its WAL, brings the copy to this
// binary's queue schema and merges its rows; the copy is removed after.
func mergeCopy(ctx context.Context, db *sql.DB, path string) (int, error) {
	tmp := path + ".merging"
	defer func() {
		for _, f := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
			os.Remove(f)
		}
	}()
	for _, suffix := range []string{"", "-wal"} {
		if err := problems.CopyFileAtomic(path+suffix, tmp+suffix); err != nil && !(suffix != "" && errors.Is(err, os.ErrNotExist)) {
			return 0, err
		}
	}
	old, err := queue.Open(ctx, tmp, queue.Options{})
	if err != nil {
		return 0, err
	}
	if err := old.Close(); err != nil {
		return 0, err
	}
	return copyQueueFile(ctx, db, tmp)
}

// mergedMarker is the component row that records the merge.
const mergedMarker = "queue.db merged"

// copyQueueFile copies the queue's tables of the file at path into db's,
// which must hold no jobs yet, and records the merge, in one transaction.
func copyQueueFile(ctx context.Context, db *sql.DB, path string) (int, error) {
	conn, err := db.Conn(ctx) // ATTACH holds for one connection
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	// A URI, escaped: a data directory may hold '?', '#' or '%'.
	uri := (&url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro"}).String()
	if _, err := conn.ExecContext(ctx, `ATTACH DATABASE ? AS legacy`, uri); err != nil {
		return 0, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `DETACH DATABASE legacy`)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM main.jobs`).Scan(&have); err != nil {
		return 0, err
	}
	if have > 0 {
		return 0, fmt.Errorf("kernelbox.db holds %d jobs already, and %s holds the old ones: move one of them away by hand", have, path)
	}
	for _, table := range []string{"jobs", "usage"} {
		cols, err := columns(ctx, tx, table)
		if err != nil {
			return 0, err
		}
		list := strings.Join(cols, ", ")
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO main.%s (%s) SELECT %s FROM legacy.%s`, table, list, list, table)); err != nil {
			return 0, fmt.Errorf("copy %s: %w", table, err)
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM main.jobs`).Scan(&n); err != nil {
		return 0, err
	}
	if err := queue.SetSchemaVersion(ctx, tx, mergedMarker, 1); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// columns are a table's column names in main, quoted.
func columns(ctx context.Context, tx *sql.Tx, table string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, `"`+name+`"`)
	}
	return out, rows.Err()
}
