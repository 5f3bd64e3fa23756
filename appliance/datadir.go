package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/problems"
)

// The data directory belongs to one daemon at a time. Two on one
// directory both recover the queue at start: the second requeues the
// first's live leases as an earlier boot's orphans, a job runs twice and
// the first's socket is replaced. So Start takes an exclusive lock on
// DATA/lock before it opens anything, and holds it until the daemon
// closes; the kernel drops it when the process dies, so a killed daemon
// never leaves a stale lock behind.

// lockFile is the lock's name in the data directory.
const lockFile = "lock"

// dirLock is a data directory's lock, held until Close.
type dirLock struct{ f *os.File }

// Close unlocks before it closes. A flock belongs to the open file, and
// a child another goroutine has just forked holds a copy of the
// descriptor until it execs: closing ours alone would leave the lock
// held for that moment, and a daemon started right after this one
// stopped was refused (CI saw it, with the pid of its own test binary).
func (l *dirLock) Close() error {
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	return l.f.Close()
}

// lockDataDir locks dir for this process, or says which process holds it.
// The lock file holds the holder's pid, for that message only.
func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf("process %d", pid)
			}
		}
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by %s (another kernelbox daemon?): one daemon per data directory", dir, holder)
		}
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f}, nil
}

// tidyDataDir makes the data directory private again (an operator's
// copy or restore may have widened it; it holds every submission's code
// and the admin's token) and removes what an earlier daemon left behind
// mid-run: runs' scratch directories and standbys' cache directories.
// It runs under the lock, before the runner starts, so none of them is
// anyone's now.
func tidyDataDir(dir string, log *slog.Logger) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	for _, name := range []string{"kernelbox.db", "kernelbox.db-wal", "kernelbox.db-shm", "queue.db", AdminTokenFile(".")} {
		err := os.Chmod(filepath.Join(dir, name), 0o600)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("data directory: %w", err)
		}
	}
	for _, leftover := range []string{filepath.Join(dir, "work"), filepath.Join(dir, "cache", "standby")} {
		entries, err := os.ReadDir(leftover)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(leftover, e.Name())); err != nil {
				log.Warn("remove what an earlier daemon left", "path", filepath.Join(leftover, e.Name()), "err", err)
			}
		}
		if len(entries) > 0 {
			log.Info("removed what an earlier daemon left mid-run", "dir", leftover, "entries", len(entries))
		}
	}
	return nil
}

// The data directory's record of its database (DATA/store-marks.json):
// the database's identity and the highest submission and run ids it has
// handed out, written after every submission. A database that loses rows
// (a damaged WAL, an older backup restored) or is deleted and made anew
// would otherwise start as if nothing happened: jobs whose runs are gone,
// a new admin token, ids handed out again. At start the two are compared
// and a mismatch stops the daemon, naming what is missing, until an
// operator restores a newer copy or accepts the loss (--accept-store-loss).

const marksFile = api.BackupMarks

// storeMarks keeps the record up to date.
type storeMarks struct {
	path string
	mu   sync.Mutex
	last store.Marks
}

// checkStore compares the database with the record (none: a data
// directory from before the record, or the first start, unless the admin
// token outlived its database) and, with accept, takes the loss.
func checkStore(ctx context.Context, dir string, st *store.Store, accept bool, log *slog.Logger) (*storeMarks, error) {
	now, err := st.Marks(ctx)
	if err != nil {
		return nil, err
	}
	sm := &storeMarks{path: filepath.Join(dir, marksFile)}
	was, found, err := readMarks(sm.path)
	if err != nil {
		return nil, err
	}
	lost := ""
	switch {
	case found && was.StoreID != now.StoreID:
		lost = fmt.Sprintf("it is not the database this directory had (store id %s, recorded %s): it was made anew or replaced", now.StoreID, was.StoreID)
	case found && (was.Submissions > now.Submissions || was.Runs > now.Runs):
		lost = fmt.Sprintf("it is older than what this box handed out: ids up to submission %d and run %d were recorded, it knows up to %d and %d",
			was.Submissions, was.Runs, now.Submissions, now.Runs)
	case !found:
		if fresh, err := st.Empty(ctx); err != nil {
			return nil, err
		} else if _, err := os.Stat(AdminTokenFile(dir)); err == nil && fresh {
			lost = "it is empty, but the admin token of an earlier one is here: it was deleted or replaced"
		}
	}
	if lost != "" {
		if !accept {
			return nil, fmt.Errorf("the database %s does not match this data directory: %s. Restore the newest backup of it, "+
				"or start once with --accept-store-loss to go on with what it holds (no id handed out before is handed out again)",
				filepath.Join(dir, "kernelbox.db"), lost)
		}
		if err := st.AcceptLoss(ctx, was); err != nil {
			return nil, err
		}
		log.Warn("started on a database that lost what it had: accepted (--accept-store-loss)", "loss", lost)
		if now, err = st.Marks(ctx); err != nil {
			return nil, err
		}
	}
	sm.last = now
	return sm, sm.write()
}

// note records ids handed out; the record only ever grows.
func (sm *storeMarks) note(submission, run int64) error {
	if sm == nil {
		return nil
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if submission <= sm.last.Submissions && run <= sm.last.Runs {
		return nil
	}
	sm.last.Submissions = max(sm.last.Submissions, submission)
	sm.last.Runs = max(sm.last.Runs, run)
	return sm.write()
}

// write replaces the record atomically and durably.
func (sm *storeMarks) write() error {
	b, err := json.Marshal(sm.last)
	if err != nil {
		return err
	}
	if err := writeFileSync(sm.path, append(b, '\n')); err != nil {
		return fmt.Errorf("record the store's marks: %w", err)
	}
	return nil
}

func readMarks(path string) (store.Marks, bool, error) {
	var m store.Marks
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &m); err != nil || m.StoreID == "" {
		return m, false, fmt.Errorf("read %s: not a record of the store (%v): remove it to start afresh", path, err)
	}
	return m, true, nil
}

// writeFileSync writes path atomically, then syncs its directory so that
// the rename itself survives a power cut.
func writeFileSync(path string, b []byte) error {
	if err := problems.WriteFileAtomic(path, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
