package appliance

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/internal/testutil"
)

// TestDaemon_UnitUmask runs `kernelbox serve` in a process of its own under
// the packaged unit's UMask=0077, with the sandbox on and the bundled
// library, as the service runs: the canary passes (/readyz), a correct
// submission passes and a wrong one fails in test and leaderboard modes,
// a backup streams, and the files the daemon keeps are its own alone.
// Under this umask every sandboxed run once failed with "permission
// denied" on the interpreter while the box said it was ready.
func TestDaemon_UnitUmask(t *testing.T) {
	t.Parallel()
	requireRootSandbox(t)
	dir := t.TempDir()
	t.Cleanup(func() { _ = syscall.Unmount(filepath.Join(dir, "sandbox"), syscall.MNT_DETACH) })
	// The harness Python as a virtual environment outside /usr would be: a
	// bind of its own, whose mount point libcontainer would make under the
	// umask (0700, so the run's uid could not reach it). Not under /tmp,
	// which is the run's own tmpfs.
	it := testutil.RequireTorch(t)
	venv, err := os.MkdirTemp("/var/tmp", "kernelbox-umask-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(venv) })
	if err := os.Chmod(venv, 0o755); err != nil { // as an installed one is
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(venv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(venv, "bin", "python3")
	if err := os.Symlink(it.Path, python); err != nil {
		t.Fatal(err)
	}
	p := startDaemonProcessWith(t, dir, processOptions{umask: "0077", python: python, conf: "binds: [" + venv + "]\n",
		args: []string{"--cgroup-parent", testCgroupParent(t)}})
	admin := p.adminOf(t, dir)
	var h *api.Health
	waitFor(t, 3*time.Minute, func() bool {
		h, err = admin.Health(t.Context())
		return err == nil && len(h.Canaries) == 1 && !h.Canaries[0].Pending
	})
	if !h.Canaries[0].OK {
		t.Fatalf("the canary under umask 0077: %s", h.Canaries[0].Reason)
	}
	p.wantReady(t, "after the canary passed")
	for _, c := range []struct {
		file, mode string
		passed     bool
	}{
		{"correct/chunked_add.py", "test", true},
		{"wrong/drops_tail.py", "test", false},
		{"correct/chunked_add.py", "leaderboard", true},
	} {
		code, err := os.ReadFile(lib("vectoradd", "solutions", c.file))
		if err != nil {
			t.Fatal(err)
		}
		sub, err := admin.Submit(t.Context(), api.SubmitRequest{Code: code, Leaderboard: "vectoradd", GPU: "cpu", Mode: c.mode, FileName: filepath.Base(c.file)})
		if err != nil {
			t.Fatalf("submit %s (%s): %v", c.file, c.mode, err)
		}
		v, err := admin.Wait(t.Context(), sub.ID, nil)
		if err != nil {
			t.Fatalf("wait for %s (%s): %v", c.file, c.mode, err)
		}
		if v.Passed != c.passed || v.Status != "done" {
			t.Errorf("%s in %s mode under umask 0077: status %s, passed %v (%s), want done and passed %v",
				c.file, c.mode, v.Status, v.Passed, v.Reason, c.passed)
		}
	}
	// A KernelBot-format problem (its own eval.py), loaded as an archive.
	var archive strings.Builder
	if err := api.PackProblemSet(&archive, filepath.Join("testdata", "quick")); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.LoadProblems(t.Context(), strings.NewReader(archive.String()), api.ProblemLoad{Name: "quick"}); err != nil {
		t.Fatal(err)
	}
	double, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := admin.Submit(t.Context(), api.SubmitRequest{Code: double, Mode: "test", FileName: "double.py"})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := admin.Wait(t.Context(), sub.ID, nil); err != nil || !v.Passed {
		t.Errorf("quick (KernelBot format) under umask 0077: %+v, %v; want passed", v, err)
	}
	if err := admin.Backup(t.Context(), io.Discard); err != nil {
		t.Errorf("backup under umask 0077: %v", err)
	}
	for name, want := range map[string]fs.FileMode{"": 0o700, "kernelbox.db": 0o600, "admin-token": 0o600} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("stat %q: %v", name, err)
		} else if got := st.Mode().Perm(); got&^want != 0 {
			t.Errorf("mode of %q = %04o, want no more than %04o", name, got, want)
		}
	}
}
