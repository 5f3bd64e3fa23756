package appliance

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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

// lockDataDir locks dir for this process, or says which process holds it.
// The lock file holds the holder's pid, for that message only.
func lockDataDir(dir string) (*os.File, error) {
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
	return f, nil
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
