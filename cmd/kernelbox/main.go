// Command kernelbox is the single kernelbox binary. It only wires: all
// behaviour lives in package appliance.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"kernelbox/appliance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return appliance.Run(ctx, args, stdout, stderr)
}

// report prints an error once and returns the exit status for it.
func report(err error, stderr io.Writer) int {
	code := appliance.ExitCode(err)
	if err != nil && err.Error() != "" {
		if ee, ok := err.(*appliance.ExitError); !ok || ee.Err != nil {
			fmt.Fprintf(stderr, "kernelbox: %v\n", err)
		}
	}
	return code
}
