package appliance

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"kernelbox/appliance/api"
)

// TestDaemon_DiskFull: on a data directory whose filesystem runs short,
// the box says so instead of "internal error": under min_free_disk,
// health is degraded and names the disk, and a submission is refused
// with 507 storage_full; with the disk quite full, a write that reaches
// SQLite answers storage_full too; freed, it takes work again. A real
// tmpfs of 16 MiB, so root only.
func TestDaemon_DiskFull(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs as the data directory")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) }) // after the daemon's own cleanup
	td := startDaemon(t, dir, func(c *Config) { c.MinFreeDisk = 4 << 20 })
	td.loadQuick()
	ctx := t.Context()
	code := []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")
	submit := func() error {
		_, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quick", Mode: "test", Code: code})
		return err
	}
	if err := submit(); err != nil {
		t.Fatalf("submit with room on the disk: %v", err)
	}
	filler := filepath.Join(dir, "filler")
	fill := func(leave int64) {
		t.Helper()
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		chunk := make([]byte, 64<<10)
		for free := int64(st.Bavail) * st.Bsize; free > leave; free -= int64(len(chunk)) {
			if _, err := f.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				return
			}
		}
	}

	fill(2 << 20) // under min_free_disk
	h, err := td.admin.Health(ctx)
	if err != nil || h.Status != "degraded" || !strings.Contains(strings.Join(h.Reasons, ";"), "min_free_disk") {
		t.Errorf("health with 2 MiB free = %+v, %v; want degraded, naming min_free_disk", h, err)
	}
	if err := submit(); api.ErrorCode(err) != api.CodeStorageFull {
		t.Errorf("submit with 2 MiB free = %v, want storage_full", err)
	}

	fill(0) // full: SQLite cannot grow its write-ahead log
	_, err = td.admin.AddUser(ctx, "zed-"+strings.Repeat("z", 40), api.RoleContestant)
	for i := 0; err == nil && i < 200; i++ { // the WAL may have room for a few
		_, err = td.admin.AddUser(ctx, "zed"+strings.Repeat("z", 40)+string(rune('a'+i%26))+strings.Repeat("y", i), api.RoleContestant)
	}
	if api.ErrorCode(err) != api.CodeStorageFull {
		t.Errorf("a write with the disk full = %v, want storage_full", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if h, err := td.admin.Health(ctx); err != nil || h.Status != "ok" {
		t.Errorf("health once space is freed = %+v, %v; want ok", h, err)
	}
	if err := submit(); err != nil {
		t.Errorf("submit once space is freed: %v", err)
	}
}
