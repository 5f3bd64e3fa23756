package gpu

import (
	"os"
	"path/filepath"
	"testing"
)

func TestProfilingRestricted(t *testing.T) {
	t.Parallel()
	restricted, err := ProfilingRestricted(filepath.Join("testdata", "nvidia"))
	if err != nil || restricted {
		t.Errorf("the NVIDIA tree (RmProfilingAdminOnly: 0) = %v, %v; want open", restricted, err)
	}
	dir := t.TempDir()
	params := filepath.Join(dir, "proc", "driver", "nvidia")
	if err := os.MkdirAll(params, 0o755); err != nil {
		t.Fatal(err)
	}
	for content, want := range map[string]bool{"RmProfilingAdminOnly: 1\n": true, "RmProfilingAdminOnly: 0\n": false, "Other: 0\n": true} {
		if err := os.WriteFile(filepath.Join(params, "params"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, _ := ProfilingRestricted(dir); got != want {
			t.Errorf("params %q: restricted = %v, want %v", content, got, want)
		}
	}
	if got, err := ProfilingRestricted(filepath.Join("testdata", "none")); !got || err == nil {
		t.Errorf("a host without the driver = %v, %v; want restricted with an error", got, err)
	}
}

func TestFindNCU(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "2025.3.1", "ncu")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "ncu")
	if err := os.Symlink(script, link); err != nil {
		t.Fatal(err)
	}
	n, err := FindNCU(link)
	if err != nil || n.Path != script || n.Dir != filepath.Dir(script) {
		t.Errorf("FindNCU(link) = %+v, %v; want the script and its directory", n, err)
	}
	if _, err := FindNCU(filepath.Join(dir, "2025.3.1")); err == nil {
		t.Error("FindNCU(a directory) succeeded")
	}
	if c := compareVersions("/opt/nvidia/nsight-compute/2025.10.0/ncu", "/opt/nvidia/nsight-compute/2025.3.1/ncu"); c <= 0 {
		t.Errorf("2025.10.0 sorts before 2025.3.1 (%d)", c)
	}
}
