// The command line lives in appliance/cli, which imports this package, so
// the daemon's tests reach it through an external test package linked into
// the same test binary: TestMain, when the binary is re-executed by
// runCLI or startDaemonProcess, runs the real command line.
package appliance_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"kernelbox/appliance"
	"kernelbox/appliance/cli"
	"kernelbox/internal/testutil"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(appliance.EnvCLI) == "1":
		err := cli.Run(context.Background(), append([]string{"kernelbox"}, testutil.ArgsAfterDashes()...), os.Stdout, os.Stderr)
		var ee *cli.ExitError
		if err != nil && (!errors.As(err, &ee) || ee.Err != nil) {
			fmt.Fprintf(os.Stderr, "kernelbox: %v\n", err)
		}
		os.Exit(cli.ExitCode(err))
	case os.Getenv(appliance.EnvServe) == "1":
		os.Exit(cli.ExitCode(cli.Run(context.Background(), append([]string{"kernelbox", "serve"}, testutil.ArgsAfterDashes()...), os.Stdout, os.Stderr)))
	}
	os.Exit(m.Run())
}
