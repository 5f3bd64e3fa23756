// Package testutil holds helpers shared by kernelbox's tests: finding the
// Python that runs the harness, and skipping out loud when it is missing.
package testutil

import (
	"context"
	"os"
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
