package problems

import (
	"io"
	"os"
	"path/filepath"
)

// MaxSubmissionBytes is the largest submission file, KernelBot's upload
// cap: `kernelbox eval` refuses larger files, and the daemon's default
// upload limit is the same.
const MaxSubmissionBytes = 1_000_000

// WriteFileAtomic writes a file whole or not at all: into a temporary
// file beside path (mode 0600), renamed over path once write has
// succeeded. Profile reports are kept by the daemon, copied by `kernelbox
// eval` and saved by the CLI with it, so a reader never meets half of one.
// The file is synced before the rename: after a power cut path holds the
// old content or the new, never an empty file.
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	err = write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// CopyFileAtomic copies src to dst with WriteFileAtomic.
func CopyFileAtomic(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return WriteFileAtomic(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}
