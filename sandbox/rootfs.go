package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// buildRootfs lays out the empty root: mount points, the merged-/usr
// symlinks of the host, a minimal /etc, and the work files to copy up.
//
// Every mode is set explicitly, never left to the daemon's umask: the run's
// uid (not root) must enter "/" and read /etc after the pivot, and the
// packaged unit runs the daemon under UMask=0077, which would leave them
// 0700 and every run failing with "permission denied" on its interpreter.
func buildRootfs(rootfs string, s *Spec) error {
	if err := mkdirMode(filepath.Dir(rootfs), 0o700); err != nil {
		return err
	}
	if err := mkdirMode(rootfs, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"proc", "dev", "sys", "tmp", "work", "etc", "usr"} {
		if err := mkdirMode(filepath.Join(rootfs, d), 0o755); err != nil {
			return err
		}
	}
	// /bin, /lib, ... are symlinks into /usr on merged-usr hosts; the same
	// links here make binaries find their interpreter and libraries.
	for _, name := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		if target, err := os.Readlink("/" + name); err == nil {
			if err := os.Symlink(target, filepath.Join(rootfs, name)); err != nil {
				return err
			}
		}
	}
	if err := makeMountPoints(rootfs, s.Binds); err != nil {
		return err
	}
	etc := map[string]string{
		"passwd": fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:%d:%d:nobody:/work:/usr/sbin/nologin\n", s.UID, s.GID),
		"group":  fmt.Sprintf("root:x:0:\nnogroup:x:%d:\n", s.GID),
		"hosts":  "127.0.0.1 localhost\n::1 localhost\n",
		// Names resolve from /etc/hosts only: there is no resolver to ask.
		"nsswitch.conf": "hosts: files\n",
	}
	for name, body := range etc {
		if err := writeFileMode(filepath.Join(rootfs, "etc", name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	work := filepath.Join(rootfs, "work")
	if s.workBind != "" {
		work = s.workBind
		if err := mkdirMode(work, 0o755); err != nil {
			return err
		}
	}
	if s.WorkDir != "" {
		if err := os.CopyFS(work, os.DirFS(s.WorkDir)); err != nil {
			return fmt.Errorf("copy work directory: %w", err)
		}
	}
	return filepath.WalkDir(work, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, s.UID, s.GID)
	})
}

// mkdirMode makes dir (not its parents) with exactly mode, whatever the
// umask; a directory already there gets mode too.
func mkdirMode(dir string, mode fs.FileMode) error {
	if err := os.Mkdir(dir, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Chmod(dir, mode)
}

// writeFileMode writes a new file with exactly mode, whatever the umask.
func writeFileMode(path string, data []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Chmod(mode); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
