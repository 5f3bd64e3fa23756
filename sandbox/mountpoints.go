package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// makeMountPoints makes, in the run's root, the directories each bind is
// mounted under (and a directory bind's own mount point), 0755 whatever
// the umask. libcontainer makes missing mount points itself, but with
// MkdirAll under the daemon's umask: under the packaged unit's
// UMask=0077 a Python virtual environment bound at /opt/venv got /opt
// 0700, and the run's uid could not reach its interpreter ("permission
// denied"), on every run. Directories go through an os.Root, so a link in
// the root is never followed out of it; a path through one of the
// skeleton's merged-/usr links is left to libcontainer, which resolves
// it inside the root.
func makeMountPoints(rootfs string, binds []Bind) error {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, b := range binds {
		dst := b.Destination
		if dst == "" {
			dst = b.Source
		}
		rel := strings.TrimPrefix(filepath.Clean("/"+dst), "/")
		if st, err := os.Stat(b.Source); err == nil && !st.IsDir() {
			rel = filepath.Dir(rel) // a file's mount point is libcontainer's to make
		}
		if err := mkdirAllIn(root, rel, 0o755); err != nil {
			return fmt.Errorf("mount point of %s: %w", dst, err)
		}
	}
	return nil
}

// mkdirAllIn makes rel's missing directories under root with exactly
// mode; it stops at a link or a file, and leaves existing directories be.
func mkdirAllIn(root *os.Root, rel string, mode fs.FileMode) error {
	p := ""
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		if c == "" || c == "." {
			continue
		}
		p = filepath.Join(p, c)
		st, err := root.Lstat(p)
		switch {
		case err == nil && st.IsDir():
			continue
		case err == nil:
			return nil // a link or a file: libcontainer's to resolve or refuse
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		if err := root.Mkdir(p, mode); err != nil {
			return err
		}
		if err := root.Chmod(p, mode); err != nil {
			return err
		}
	}
	return nil
}
