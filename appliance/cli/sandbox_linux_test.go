//go:build linux && cgo

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/appliance/api"
	"kernelbox/internal/testutil"
	"kernelbox/sandbox"
)

func TestSandboxRun_CLI(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	stdout, stderr, code := runCLI(t, "sandbox", "run", "--json", "--timeout", "10s", "--memory", "256M", "--", "/bin/sh", "-c", "echo hi; exit 3")
	if code != api.ExitFailed {
		t.Fatalf("exit %d, want %d; stderr %s", code, api.ExitFailed, stderr)
	}
	var doc struct {
		Verdict  string `json:"verdict"`
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if doc.Verdict != "nonzero_exit" || doc.ExitCode != 3 || doc.Stdout != "hi\n" {
		t.Errorf("result = %+v", doc)
	}
	if _, stderr, code := runCLI(t, "sandbox", "run", "--memory", "lots", "--", "/bin/true"); code != api.ExitUsage || !strings.Contains(stderr, "--memory") {
		t.Errorf("bad --memory: exit %d, %q", code, stderr)
	}
}

func TestDoctor(t *testing.T) {
	t.Parallel()
	stdout, _, code := runCLI(t, "doctor")
	for _, name := range []string{"root", "cgroups", "seccomp (this build)", "harness Python", "GPU"} {
		if !strings.Contains(stdout, name) {
			t.Errorf("doctor does not report %q:\n%s", name, stdout)
		}
	}
	if !strings.Contains(stdout, "✓ GPUs                   none, so the CPU backend") && !strings.Contains(stdout, "GPU 0 ") {
		t.Errorf("doctor says neither which GPUs it found nor that there are none:\n%s", stdout)
	}
	healthy := os.Geteuid() == 0 && strings.Contains(stdout, "✓ seccomp (this build)") && strings.Contains(stdout, "✓ harness Python")
	if healthy && (code != 0 || !strings.Contains(stdout, "✓ sandbox run") || !strings.Contains(stdout, "✓ canary")) {
		t.Errorf("doctor on a healthy host: exit %d\n%s", code, stdout)
	}
	if !healthy && (code != api.ExitFailed || !strings.Contains(stdout, "fix:")) {
		t.Errorf("doctor on a host that cannot sandbox: exit %d, want %d with fixes\n%s", code, api.ExitFailed, stdout)
	}
}

// TestDoctor_BrokenSandbox: a harness Python the sandbox cannot see (a
// link in a directory no bind brings in) passes the probe outside the
// sandbox; the canary inside fails, and doctor with it, naming the cause.
func TestDoctor_BrokenSandbox(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	it := testutil.RequireTorch(t)
	hidden := filepath.Join(t.TempDir(), "python3")
	if err := os.Symlink(it.Path, hidden); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(conf, []byte("python: "+hidden+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := runCLI(t, "doctor", "--config", conf)
	if code != api.ExitFailed || !strings.Contains(stdout, "✗ canary") || !strings.Contains(stdout, "no such file") {
		t.Errorf("doctor with a Python outside the sandbox's binds = exit %d, want %d and the canary failed with the cause:\n%s",
			code, api.ExitFailed, stdout)
	}
}

// requireRootSandbox skips unless this process can start sandboxes.
func requireRootSandbox(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to start containers (CI runs as root)")
	}
	if !sandbox.SeccompBuilt() {
		t.Skip("needs the seccomp build tag: run make test, or go test -tags seccomp")
	}
}
