package appliance

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDaemon_OneDaemonPerDataDir: a second daemon on a data directory in
// use refuses to start, naming the directory and the holder, and leaves
// the first one whole (its socket, its health); once the first stops, it
// starts.
func TestDaemon_OneDaemonPerDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startDaemon(t, dir, nil)
	cfg := first.d.cfg
	second := NewDaemon(cfg, testLogger(t))
	second.Python = first.d.Python
	err := second.Start(t.Context())
	if err == nil {
		second.Stop(t.Context())
		t.Fatalf("a second daemon on %s started", dir)
	}
	if want := "process " + strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), want) {
		t.Errorf("second Start() = %v; want it to name %s and the holder (%s)", err, dir, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "kernelbox.sock")); err != nil {
		t.Errorf("the first daemon's socket after the second's try: %v", err)
	}
	if h, err := first.admin.Health(t.Context()); err != nil || h.Status != "ok" {
		t.Errorf("the first daemon's health after the second's try = %+v, %v", h, err)
	}
	first.stop()
	third := startDaemon(t, dir, nil)
	if h, err := third.admin.Health(t.Context()); err != nil || h.Status != "ok" {
		t.Errorf("a daemon after the first stopped: health %+v, %v", h, err)
	}
}

// TestDaemon_TidiesDataDir: at start the data directory and its secrets
// are made private again, and what an earlier daemon left mid-run (runs'
// scratch, standbys' caches) is removed; users' caches are kept.
func TestDaemon_TidiesDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startDaemon(t, dir, nil)
	first.stop()
	leftovers := []string{filepath.Join(dir, "work", "run-9-123", "work", "x"), filepath.Join(dir, "cache", "standby", "cache-1", "triton", "k")}
	kept := filepath.Join(dir, "cache", "7", "triton", "abc", "k.cubin")
	for _, f := range append(leftovers, kept) {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An operator's restore that widened everything.
	for path, mode := range map[string]os.FileMode{dir: 0o755, filepath.Join(dir, "kernelbox.db"): 0o644, AdminTokenFile(dir): 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	startDaemon(t, dir, nil)
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "kernelbox.db"): 0o600, AdminTokenFile(dir): 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, st.Mode().Perm(), err, want)
		}
	}
	for _, d := range []string{filepath.Join(dir, "work", "run-9-123"), filepath.Join(dir, "cache", "standby", "cache-1")} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s is still there", d)
		}
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("a user's cache was removed: %v", err)
	}
}
