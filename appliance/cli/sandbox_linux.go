//go:build linux && cgo

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/policies"
	"kernelbox/sandbox"
)

func limitFlags() []cli.Flag {
	d := policies.DefaultLimits()
	return []cli.Flag{
		&cli.StringFlag{Name: "memory", Value: policies.ByteSize(d.Memory).String(), Usage: "memory limit (K, M, G suffixes)"},
		&cli.Int64Flag{Name: "pids", Value: d.Pids, Usage: "process and thread limit"},
		&cli.Float64Flag{Name: "cpus", Value: d.CPUs, Usage: "CPU quota in cores (0: none)"},
		&cli.StringFlag{Name: "cpuset", Usage: "CPUs the run may use, as 0-3,8"},
		&cli.StringFlag{Name: "tmp-size", Value: policies.ByteSize(d.TmpSize).String(), Usage: "size of /tmp, /work and /dev/shm each"},
		&cli.StringFlag{Name: "output-limit", Value: policies.ByteSize(d.OutputBytes).String(), Usage: "cap on each of stdout and stderr"},
		&cli.StringSliceFlag{Name: "bind", Usage: "extra read-only bind SRC[:DST] (repeatable; append :rw for writable)"},
		deviceFlag(),
	}
}

// devicesFrom turns --device paths into sandbox devices, reading each
// node's type and numbers from the host.
func devicesFrom(c *cli.Context) ([]sandbox.Device, error) {
	var out []sandbox.Device
	for _, p := range c.StringSlice("device") {
		d, err := sandbox.HostDevice(p)
		if err != nil {
			return nil, fmt.Errorf("--device %s: %w", p, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func limitsFrom(c *cli.Context) (policies.Limits, []sandbox.Bind, error) {
	l := policies.DefaultLimits()
	sizes := map[string]policies.ByteSize{}
	for _, name := range []string{"memory", "tmp-size", "output-limit"} {
		v, err := policies.ParseByteSize(c.String(name))
		if err != nil {
			return l, nil, fmt.Errorf("--%s: %w", name, err)
		}
		sizes[name] = v
	}
	l.Memory, l.TmpSize, l.OutputBytes = int64(sizes["memory"]), int64(sizes["tmp-size"]), int(sizes["output-limit"])
	l.Pids, l.CPUs, l.Cpuset = c.Int64("pids"), c.Float64("cpus"), c.String("cpuset")
	if c.IsSet("timeout") {
		l.WallTime = c.Duration("timeout")
	}
	binds, err := bindsFrom(c)
	if err != nil {
		return l, nil, err
	}
	return l, binds, l.Validate()
}

// bindsFrom reads the repeatable --bind SRC[:DST][:rw] flag.
func bindsFrom(c *cli.Context) ([]sandbox.Bind, error) {
	var binds []sandbox.Bind
	for _, spec := range c.StringSlice("bind") {
		parts := strings.Split(spec, ":")
		b := sandbox.Bind{Source: parts[0]}
		if len(parts) > 1 && parts[len(parts)-1] == "rw" {
			b.Writable = true
			parts = parts[:len(parts)-1]
		}
		if len(parts) > 1 {
			b.Destination = parts[1]
		}
		if len(parts) > 2 || !filepath.IsAbs(b.Source) {
			return nil, fmt.Errorf("--bind %q: want an absolute SRC[:DST][:rw]", spec)
		}
		binds = append(binds, b)
	}
	return binds, nil
}

func sandboxCommand() *cli.Command {
	flags := append(limitFlags(),
		&cli.DurationFlag{Name: "timeout", Value: policies.DefaultLimits().WallTime, Usage: "wall-clock limit; the whole process tree is killed"},
		&cli.StringFlag{Name: "workdir", Usage: "a directory whose contents are copied into /work"},
		&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
	)
	return &cli.Command{
		Name:  "sandbox",
		Usage: "run commands in the sandbox submissions run in",
		Subcommands: []*cli.Command{{
			Name:      "run",
			Usage:     "run a command in a fresh sandbox and print its verdict (needs root)",
			ArgsUsage: "-- CMD [ARGS...]",
			Flags:     flags,
			Action:    runSandbox,
		}},
	}
}

func runSandbox(c *cli.Context) error {
	if c.NArg() == 0 {
		return usageError("sandbox run: give a command after --")
	}
	limits, binds, err := limitsFrom(c)
	if err != nil {
		return usageError("sandbox run: %v", err)
	}
	rt, cleanup, err := runner.NewOneShotRuntime(slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return usageError("sandbox run: %v", err)
	}
	defer cleanup()
	devices, err := devicesFrom(c)
	if err != nil {
		return usageError("sandbox run: %v", err)
	}
	res, err := rt.Run(c.Context, sandbox.Spec{
		Args: c.Args().Slice(), Env: runner.SandboxEnv(), WorkDir: c.String("workdir"),
		Binds: append(sandbox.DefaultBinds(), binds...), Devices: devices, Limits: limits,
	})
	if err != nil {
		return usageError("sandbox run: %v", err)
	}
	writeSandboxResult(c.App.Writer, res, c.Bool("json"))
	if res.Verdict != sandbox.VerdictOK {
		return &ExitError{Code: api.ExitFailed}
	}
	return nil
}

func writeSandboxResult(w io.Writer, res *sandbox.Result, asJSON bool) {
	if asJSON {
		doc := struct {
			*sandbox.Result
			Stdout string `json:"stdout"`
			Stderr string `json:"stderr"`
		}{res, string(res.Stdout), string(res.Stderr)}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(doc)
		return
	}
	if len(res.Stdout) > 0 {
		fmt.Fprintf(w, "%s", res.Stdout)
		if res.Stdout[len(res.Stdout)-1] != '\n' {
			fmt.Fprintln(w)
		}
	}
	if len(res.Stderr) > 0 {
		fmt.Fprintf(w, "stderr:\n%s\n", indent(strings.TrimRight(string(res.Stderr), "\n"), "  "))
	}
	fmt.Fprintf(w, "verdict %s · exit %d", res.Verdict, res.ExitCode)
	if res.Signal != "" {
		fmt.Fprintf(w, " · signal %s", res.Signal)
	}
	fmt.Fprintf(w, " · wall %s · cpu %s · peak memory %s", res.Wall.Round(time.Millisecond), res.CPU.Round(time.Millisecond), policies.ByteSize(res.PeakMemory))
	if res.Truncated {
		fmt.Fprint(w, " · output truncated")
	}
	if res.Error != "" {
		fmt.Fprintf(w, "\nerror: %s", res.Error)
	}
	fmt.Fprintln(w)
}
