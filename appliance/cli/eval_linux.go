//go:build linux && cgo

package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance"
	"kernelbox/appliance/runner"
	"kernelbox/gpu"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

// evalCeilings are the peak rates eval holds the timings to, as the
// daemon would on this host, and where they come from: on a GPU, NVML's or
// sysfs's model of it.
func evalCeilings(c *cli.Context, device string) (*problems.Ceilings, string) {
	var inv gpu.Inventory
	if device != "cpu" {
		inv = gpu.Discover(c.Context, gpu.Options{})
	}
	return runner.LocalCeilings(device, inv)
}

// evalLauncher is what `kernelbox eval` runs the harness with: the
// process itself, or with --sandbox the daemon's sandboxed launcher; and
// in profile mode, Nsight Compute where there is a CUDA device (or where
// --ncu names one, as the tests do on the CPU backend). cleanup is never
// nil.
func evalLauncher(c *cli.Context, it *problems.Interpreter, mode problems.Mode) (problems.Launcher, []string, *problems.Profiler, func(), error) {
	none := func() {}
	var profiler *problems.Profiler
	var profBinds []sandbox.Bind
	if mode == problems.ModeProfile && c.String("ncu") != "off" && (it.Device == "cuda" || c.IsSet("ncu")) {
		ncu, err := gpu.FindNCU(c.String("ncu"))
		switch {
		case err != nil && c.IsSet("ncu"):
			return nil, nil, nil, none, usageError("eval: %v", err)
		case err != nil:
			fmt.Fprintf(c.App.ErrWriter, "kernelbox eval: %v; profile mode prints PyTorch's table\n", err)
		default:
			profiler = &problems.Profiler{NCU: ncu.Path, MaxKernels: appliance.DefaultConfig().Profiler.MaxKernels}
			profBinds = []sandbox.Bind{{Source: ncu.Dir}}
		}
	}
	if !c.Bool("sandbox") {
		return problems.ExecLauncher{}, os.Environ(), profiler, none, nil
	}
	extra, err := bindsFrom(c)
	if err != nil {
		return nil, nil, nil, none, usageError("eval: %v", err)
	}
	devices, err := devicesFrom(c)
	if err != nil {
		return nil, nil, nil, none, usageError("eval: %v", err)
	}
	rt, cleanup, err := runner.NewOneShotRuntime(slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return nil, nil, nil, none, usageError("eval --sandbox: %v", err)
	}
	l, env := runner.NewSandboxLauncher(rt, runner.LauncherSpec{Python: it, Binds: append(extra, profBinds...),
		Devices: devices, Limits: policies.ForMode(string(mode), 0)})
	return l, env, profiler, cleanup, nil
}
