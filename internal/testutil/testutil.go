// Package testutil holds helpers shared by kernelbox's tests: finding the
// Python that runs the harness, and skipping out loud when it is missing.
package testutil

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"kernelbox/problems"
)

var (
	pyOnce sync.Once
	pyInt  *problems.Interpreter
	pyErr  error
)

// RequireTorch returns the interpreter that imports torch, or skips the test
// saying how to get one. Discovery runs once per test binary.
func RequireTorch(tb testing.TB) *problems.Interpreter {
	tb.Helper()
	if testing.Short() {
		tb.Skip("skipped in -short mode: runs the Python harness")
	}
	pyOnce.Do(func() {
		pyInt, pyErr = problems.FindPython(context.Background(), problems.PythonCandidates())
	})
	if pyErr != nil {
		tb.Skipf("needs a Python with PyTorch (run packaging/setup.sh, or set PATH so python3 imports torch): %v", pyErr)
	}
	return pyInt
}

// RepoRoot is the module root, for tests that read the bundled library. It
// is found from the working directory (a test runs in its package's
// directory), so a test binary built here also runs in a copy of the tree
// elsewhere, as on the GPU machine.
func RepoRoot() string {
	dir, err := os.Getwd()
	if err == nil {
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// EditFile replaces the first old with new in a file, failing the test if
// old is not there (an edit that silently did nothing proves nothing).
func EditFile(tb testing.TB, path, old, new string) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		tb.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// RunSelf runs this test binary again as a child with env=1 set and args
// after "--", the way a TestMain that checks env hands them to the real
// command line: each command in a process of its own, as a user runs it
// (urfave/cli shares its help flag between apps and writes into it, so two
// apps in one process race). It returns the child's output and exit code.
func RunSelf(tb testing.TB, env string, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	cmd := exec.CommandContext(tb.Context(), os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), env+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		tb.Fatalf("run the command line: %v", err)
	}
	return out.String(), errb.String(), code
}

// ArgsAfterDashes are the arguments RunSelf passed after "--".
func ArgsAfterDashes() []string {
	for i, a := range os.Args {
		if a == "--" {
			return os.Args[i+1:]
		}
	}
	return nil
}
