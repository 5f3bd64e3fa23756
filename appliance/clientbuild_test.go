package appliance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/internal/testutil"
)

// TestDaemon_ClientOnlyBuild: the client a contestant runs on a laptop (a
// build without cgo, as for macOS and Windows) submits, reads the
// leaderboard and lists submissions against a real daemon, and says that
// serving needs the Linux build. It is the linux CGO_ENABLED=0 build here;
// CI cross-builds the darwin and windows ones from the same files.
func TestDaemon_ClientOnlyBuild(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command to build the client (not on the GPU machine)")
	}
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	client := filepath.Join(t.TempDir(), "kernelbox")
	build := exec.CommandContext(t.Context(), goBin, "build", "-o", client, "./cmd/kernelbox")
	build.Dir = testutil.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./cmd/kernelbox: %v\n%s", err, out)
	}
	out, errOut, code := td.cli(td.token, "admin", "users", "add", "cleo")
	if code != 0 {
		t.Fatalf("admin users add = exit %d: %s", code, errOut)
	}
	token := strings.TrimSpace(out)
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), client, append(args, "--server", td.server, "--token", token,
			"--client-config", filepath.Join(t.TempDir(), "client.json"))...)
		b, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("run the client: %v", err)
		}
		return string(b), code
	}
	out, code = run("submit", quickSolution("correct/double.py"), "--mode", "leaderboard")
	if code != 0 || !strings.Contains(out, "PASSED: submission") || !strings.Contains(out, "rank 1") {
		t.Fatalf("client submit --mode leaderboard = exit %d:\n%s", code, out)
	}
	if out, code = run("leaderboard", "quick"); code != 0 || !strings.Contains(out, "cleo") {
		t.Errorf("client leaderboard quick = exit %d, want cleo ranked:\n%s", code, out)
	}
	if out, code = run("submissions", "list"); code != 0 || !strings.Contains(out, "quick") || !strings.Contains(out, "done") {
		t.Errorf("client submissions list = exit %d, want the done submission:\n%s", code, out)
	}
	cmd := exec.CommandContext(t.Context(), client, "serve", "--data", t.TempDir())
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), "needs the Linux build with cgo") {
		t.Errorf("client serve = %v:\n%s\nwant exit 2 saying it needs the Linux build with cgo", err, b)
	}
}
