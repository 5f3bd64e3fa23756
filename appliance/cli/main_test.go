package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"kernelbox/internal/testutil"
)

// envCLI makes this test binary run the command line with the arguments
// after "--" (runCLI), printing an error as cmd/kernelbox does.
const envCLI = "KERNELBOX_TEST_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(envCLI) == "1" {
		err := Run(context.Background(), append([]string{"kernelbox"}, testutil.ArgsAfterDashes()...), os.Stdout, os.Stderr)
		var ee *ExitError
		if err != nil && (!errors.As(err, &ee) || ee.Err != nil) {
			fmt.Fprintf(os.Stderr, "kernelbox: %v\n", err)
		}
		os.Exit(ExitCode(err))
	}
	os.Exit(m.Run())
}

// runCLI runs the command line in a process of its own, as a user would.
func runCLI(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return testutil.RunSelf(t, envCLI, args...)
}
