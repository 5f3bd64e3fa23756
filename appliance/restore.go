package appliance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// A restore replaces a stopped daemon's data directory with a backup's.
// It takes the directory's lock (a running daemon makes it refuse), reads
// and checks the whole archive into DIR/.restore-tmp before it touches
// anything, and then swaps the parts in under a record that no daemon
// accepts: store-marks.json first names a store id no database has, and
// only once every part is in place is it written with the restored
// database's. A restore cut short leaves a directory the daemon refuses
// to start on (run the restore again), never a half-restored one it
// takes for whole.

// restoreIncomplete is the store id of the record during the swap.
const restoreIncomplete = "restore-incomplete-run-kernelbox-admin-restore-again"

// restoreSwapped are the data directory's parts a restore replaces; the
// database's WAL files and the legacy queue file go with it (a WAL of
// another database would be applied to the restored one), and the
// per-user compile caches too: user ids created after the backup are
// handed out again, to other users.
var restoreSwapped = []string{"kernelbox.db", "kernelbox.db-wal", "kernelbox.db-shm", "queue.db", "admin-token", "problems", "profiles", "cache"}

// RestoreOptions tune Restore.
type RestoreOptions struct {
	// Force replaces a database that is newer than the backup, or
	// another store's.
	Force bool
	Log   *slog.Logger
}

// Restored says what a restore did.
type Restored struct {
	Manifest *api.Manifest
	// Marks is the data directory's record now: the restored database's
	// id floors, raised to every id handed out before.
	Marks store.Marks
	// Replaced is the database that was there, if one was.
	Replaced *store.Summary
	// LostSubmissions and LostRuns are the id ranges handed out after the
	// backup (first, last; zero when none): gone, and never reused.
	LostSubmissions, LostRuns [2]int64
}

// Restore puts the backup at archive into the data directory dir.
func Restore(ctx context.Context, archive, dir string, opt RestoreOptions) (*Restored, error) {
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	f, err := os.Open(archive)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	lock, err := lockDataDir(dir)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	defer lock.Close()

	tmp := filepath.Join(dir, ".restore-tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("restore: clear an earlier attempt: %w", err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	defer os.RemoveAll(tmp)
	m, err := api.ReadBackup(f, func(name string, mode int64, body io.Reader) error {
		return unpack(tmp, name, mode, body)
	})
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", archive, err)
	}
	newDB := filepath.Join(tmp, api.BackupDB)
	got, err := store.Inspect(ctx, newDB)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w: %w", archive, api.ErrBadBackup, err)
	}
	if got.StoreMarks != m.Database.StoreMarks {
		return nil, fmt.Errorf("restore %s: %w: its database (%+v) is not the one its manifest describes (%+v)", archive, api.ErrBadBackup, got.StoreMarks, m.Database.StoreMarks)
	}

	res := &Restored{Manifest: m}
	// The highest ids handed out by anyone: the backup's record, this
	// directory's, and the database being replaced.
	rec := m.Marks
	rec.Submissions = max(rec.Submissions, got.Submissions)
	rec.Runs = max(rec.Runs, got.Runs)
	was, found, err := readMarks(filepath.Join(dir, marksFile))
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	if found {
		rec.Submissions, rec.Runs = max(rec.Submissions, was.Submissions), max(rec.Runs, was.Runs)
	}
	if err := checkReplaced(ctx, dir, m, was, found, opt.Force, res); err != nil {
		return nil, err
	}
	if res.Replaced != nil {
		rec.Submissions, rec.Runs = max(rec.Submissions, res.Replaced.Submissions), max(rec.Runs, res.Replaced.Runs)
	}
	if rec.Submissions > got.Submissions {
		res.LostSubmissions = [2]int64{got.Submissions + 1, rec.Submissions}
	}
	if rec.Runs > got.Runs {
		res.LostRuns = [2]int64{got.Runs + 1, rec.Runs}
	}

	// Bring the database to this binary's schema and raise its id floors
	// (the path --accept-store-loss takes), so the daemon starts on it as
	// it is.
	st, err := store.Open(ctx, newDB, nil)
	if err != nil {
		return nil, fmt.Errorf("restore: open the backup's database: %w", err)
	}
	if res.LostSubmissions[1] > 0 || res.LostRuns[1] > 0 {
		err = st.AcceptLoss(ctx, rec)
	}
	if err == nil {
		res.Marks, err = st.Marks(ctx)
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("restore: raise the restored database's id floors: %w", err)
	}

	if err := swapIn(dir, tmp, rec, res.Marks); err != nil {
		return nil, fmt.Errorf("restore into %s: %w (the directory is marked unfinished: the daemon will not start on it; run the restore again)", dir, err)
	}
	opt.Log.Info("restored a backup", "archive", archive, "dir", dir, "store", res.Marks.StoreID,
		"submissions", res.Marks.Submissions, "runs", res.Marks.Runs)
	return res, nil
}

// checkReplaced refuses, unless force, to replace a database newer than
// the backup's or another store's.
func checkReplaced(ctx context.Context, dir string, m *api.Manifest, was store.Marks, found, force bool, res *Restored) error {
	path := filepath.Join(dir, "kernelbox.db")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if found && was.StoreID == restoreIncomplete {
		return nil // an earlier restore was cut short: finish the job
	}
	cur, err := store.Inspect(ctx, path)
	if err != nil {
		if !force {
			return fmt.Errorf("restore: the database in %s cannot be read (%w); pass --force to replace it", dir, err)
		}
		return nil
	}
	res.Replaced = &cur
	if force {
		return nil
	}
	b := m.Database
	switch {
	case cur.StoreID != b.StoreID:
		return fmt.Errorf("restore: %s holds another database (store id %s, %d submissions; the backup is of store %s): pass --force to replace it",
			dir, cur.StoreID, cur.Count, b.StoreID)
	case cur.Submissions > b.Submissions || cur.Runs > b.Runs:
		return fmt.Errorf("restore: the database in %s is newer than the backup (ids up to submission %d and run %d; the backup's go up to %d and %d): "+
			"pass --force to go back to the backup, losing what came after it", dir, cur.Submissions, cur.Runs, b.Submissions, b.Runs)
	}
	return nil
}

// swapIn moves the restored parts from tmp into dir, the replaced ones
// aside first, under a record no daemon accepts until the end.
func swapIn(dir, tmp string, rec, final store.Marks) error {
	marks := &storeMarks{path: filepath.Join(dir, marksFile), last: store.Marks{StoreID: restoreIncomplete, Submissions: rec.Submissions, Runs: rec.Runs}}
	if err := marks.write(); err != nil {
		return err
	}
	old := filepath.Join(dir, ".restore-old")
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	if err := os.Mkdir(old, 0o700); err != nil {
		return err
	}
	for _, name := range restoreSwapped {
		err := os.Rename(filepath.Join(dir, name), filepath.Join(old, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for _, name := range restoreSwapped {
		err := os.Rename(filepath.Join(tmp, name), filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	marks.last = final
	if err := marks.write(); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// restoredPerm is the mode of a restored file: the owner's alone, as the
// daemon keeps the data directory's files (tidyDataDir), whatever mode
// the archive recorded. A backup of a daemon started by hand under umask
// 022 records its database as 0644; the unit's UMask=0077 made it 0600.
// The owner's execute bit is kept.
func restoredPerm(mode int64) os.FileMode {
	return 0o600 | os.FileMode(mode)&0o100
}

// unpack writes one archive file under root (the name is checked).
func unpack(root, name string, mode int64, body io.Reader) error {
	p := filepath.Join(root, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	perm := restoredPerm(mode)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	// OpenFile's mode passes through the umask, which may take the
	// owner's bits away (umask 0277 leaves 0400): set it whole.
	err = f.Chmod(perm)
	if err == nil {
		_, err = io.Copy(f, body)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
