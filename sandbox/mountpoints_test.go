package sandbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestMakeMountPoints: a bind's parents are made 0755 under any umask, a
// file bind's own mount point is left to libcontainer, and a link in the
// root is not followed out of it.
func TestMakeMountPoints(t *testing.T) {
	// Not parallel: it sets the process's umask, as the unit's UMask= does.
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	rootfs, outside := t.TempDir(), t.TempDir()
	file := filepath.Join(t.TempDir(), "ld.so.cache")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(rootfs, "lnk")); err != nil {
		t.Fatal(err)
	}
	binds := []Bind{
		{Source: t.TempDir(), Destination: "/opt/torch/.venv"},
		{Source: file, Destination: "/etc/cache/ld.so.cache"},
		{Source: t.TempDir(), Destination: "/lnk/escape"},
	}
	if err := makeMountPoints(rootfs, binds); err != nil {
		t.Fatalf("makeMountPoints: %v", err)
	}
	for _, d := range []string{"opt", "opt/torch", "opt/torch/.venv", "etc", "etc/cache"} {
		st, err := os.Lstat(filepath.Join(rootfs, d))
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, %v; want a directory 0755", d, st, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(rootfs, "etc/cache/ld.so.cache")); err == nil {
		t.Error("made a file bind's mount point: libcontainer makes it")
	}
	if _, err := os.Lstat(filepath.Join(outside, "escape")); err == nil {
		t.Error("followed a link out of the root")
	}
}
