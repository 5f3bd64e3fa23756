//go:build linux && cgo

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/appliance/api"
)

// TestConfigCommand: config check passes a good file and lists every
// problem of a bad one by key and line; config show prints the merged
// configuration; doctor reports a bad file as a failed check.
func TestConfigCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("listen: 0.0.0.0:8470\nlog_format: json\nmeasurement: {clocks: {H200: \"1500\"}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("listen: 0.0.0.0:8470\ncpu_slot: 2\nmeasurement:\n  wait: soon\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runCLI(t, "config", "check", good); code != 0 || !strings.Contains(out, good+": ok") {
		t.Errorf("config check good = exit %d %q %q", code, out, errOut)
	}
	_, errOut, code := runCLI(t, "config", "check", bad)
	for _, want := range []string{"cpu_slot: line 2: unknown key (did you mean cpu_slots?)", "measurement.wait: line 4: want a duration"} {
		if code != api.ExitFailed || !strings.Contains(errOut, want) {
			t.Errorf("config check bad = exit %d %q, want exit %d saying %q", code, errOut, api.ExitFailed, want)
		}
	}
	if _, errOut, code := runCLI(t, "config", "check", filepath.Join(dir, "none.yaml")); code != api.ExitFailed || !strings.Contains(errOut, "no file") {
		t.Errorf("config check of a missing file = exit %d %q", code, errOut)
	}
	out, _, code := runCLI(t, "config", "show", good)
	if code != 0 || !strings.Contains(out, "listen: 0.0.0.0:8470") || !strings.Contains(out, "log_format: json") || !strings.Contains(out, "H200: \"1500\"") ||
		!strings.Contains(out, "cpu_slots: 1") {
		t.Errorf("config show = exit %d\n%s\nwant the file's keys over the defaults", code, out)
	}
	out, _, code = runCLI(t, "doctor", "--config", bad)
	if code != api.ExitFailed || !strings.Contains(out, "✗ config") || !strings.Contains(out, "cpu_slot: line 2") {
		t.Errorf("doctor --config bad = exit %d\n%s\nwant the config check failed", code, out)
	}
}
