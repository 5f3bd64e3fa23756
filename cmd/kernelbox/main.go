// Command kernelbox is the single kernelbox binary. It only wires: all
// behaviour lives in package appliance/cli and what it calls.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"kernelbox/appliance/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.Run(ctx, args, stdout, stderr)
}

// report prints an error once and returns the exit status for it.
func report(err error, stderr io.Writer) int {
	code := cli.ExitCode(err)
	if err != nil && err.Error() != "" {
		if ee, ok := err.(*cli.ExitError); !ok || ee.Err != nil {
			fmt.Fprintf(stderr, "kernelbox: %v\n", err)
		}
	}
	return code
}
