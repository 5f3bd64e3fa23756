package appliance

import (
	"path/filepath"
	"testing"

	"kernelbox/internal/testutil"
)

// runCLI runs the real command line (appliance/cli, through main_test.go's
// TestMain) in a process of its own, as a user would.
func runCLI(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return testutil.RunSelf(t, EnvCLI, args...)
}

func lib(parts ...string) string {
	return filepath.Join(append([]string{testutil.RepoRoot(), "problems", "library"}, parts...)...)
}
