//go:build !linux || !cgo

package cli

import (
	"fmt"
	"os"
	"runtime"

	"github.com/urfave/cli/v2"

	"kernelbox/problems"
)

// The daemon, the sandbox and the GPU checks are Linux's and need cgo
// (libcontainer, libseccomp, NVML). A build without them (macOS, Windows,
// or Linux with CGO_ENABLED=0) is the contestant's client: the commands are
// there, so that `kernelbox help` reads the same everywhere, and say why
// they do not run.

func serveCommand() *cli.Command {
	return linuxOnly("serve", "run the daemon (the box's build only: Linux with cgo)")
}
func sandboxCommand() *cli.Command {
	return linuxOnly("sandbox", "run commands in the sandbox (the box's build only: Linux with cgo)")
}
func doctorCommand() *cli.Command {
	return linuxOnly("doctor", "check that this host can run kernelbox (the box's build only: Linux with cgo)")
}

func nodeCommand() *cli.Command {
	return linuxOnly("node", "the node side of the slurm executor (the box's build only: Linux with cgo)")
}

func configCommand() *cli.Command {
	return linuxOnly("config", "check the daemon's config file (the box's build only: Linux with cgo)")
}

func linuxOnly(name, usage string) *cli.Command {
	return &cli.Command{
		Name: name, Usage: usage, SkipFlagParsing: true,
		Action: func(*cli.Context) error {
			return usageError("%s needs the Linux build with cgo (this is a client-only build for %s): run it on the box; from here, submit with `kernelbox submit`", name, runtime.GOOS)
		},
	}
}

// evalCeilings: the client build links neither NVML nor the host
// measurement (kernelbox/gpu), so its eval applies no physics floor.
func evalCeilings(*cli.Context, string) (*problems.Ceilings, string) {
	return nil, "none in this client build (the box's build applies them)"
}

// evalLauncher runs the harness as a process of this machine: --sandbox
// and Nsight Compute are Linux's.
func evalLauncher(c *cli.Context, _ *problems.Interpreter, mode problems.Mode) (problems.Launcher, []string, *problems.Profiler, func(), error) {
	none := func() {}
	if c.Bool("sandbox") {
		return nil, nil, nil, none, usageError("eval --sandbox needs the Linux build with cgo (this is a client-only build for %s)", runtime.GOOS)
	}
	if mode == problems.ModeProfile && c.IsSet("ncu") && c.String("ncu") != "off" {
		return nil, nil, nil, none, usageError("eval --ncu needs the Linux build with cgo (this is a client-only build for %s)", runtime.GOOS)
	}
	if mode == problems.ModeProfile {
		fmt.Fprintln(c.App.ErrWriter, "kernelbox eval: no Nsight Compute here; profile mode prints PyTorch's table")
	}
	return problems.ExecLauncher{}, os.Environ(), nil, none, nil
}
