package appliance

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/policies"
)

// A full disk is the operator's to fix, and the client is told so (507,
// storage_full) instead of "internal error": SQLite's SQLITE_FULL and a
// file's ENOSPC alike. Before it comes to that, the box refuses new
// submissions while the data directory's filesystem has less than
// min_free_disk free, and health says why.

// diskFull says whether err is a disk, or the database, that is full.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || store.IsFull(err)
}

// errDiskFull is what a client is told when its request found the disk full.
func errDiskFull() error {
	return api.Errorf(api.CodeStorageFull, "the box's disk is full, so nothing can be stored now; an operator must free space (the daemon's log says more)")
}

// diskProblem says why the data directory's filesystem is too full to
// take work, or "".
func (s *Service) diskProblem() string {
	if s.cfg.MinFreeDisk <= 0 {
		return ""
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.cfg.DataDir, &st); err != nil {
		return fmt.Sprintf("cannot read the free space of the data directory: %v", err)
	}
	free := policies.ByteSize(int64(st.Bavail) * int64(st.Bsize))
	if free < s.cfg.MinFreeDisk {
		return fmt.Sprintf("the data directory's disk has %s free, under min_free_disk (%s): submissions are refused until space is freed",
			free, s.cfg.MinFreeDisk)
	}
	return ""
}
