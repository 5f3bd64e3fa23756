package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"kernelbox/appliance/api"

	"github.com/urfave/cli/v2"

	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

// sandboxLauncher runs harness processes in the sandbox: problems drives
// the phases, sandbox isolates each one.
type sandboxLauncher struct {
	rt      *sandbox.Runtime
	binds   []sandbox.Bind
	devices []sandbox.Device
	limits  policies.Limits
	mask    []string // more /proc paths to hide (the other GPUs')
}

var _ problems.Launcher = (*sandboxLauncher)(nil)

// Launch runs one harness process in a fresh container. The work directory
// is copied in, so the process cannot change the host's copy.
func (l *sandboxLauncher) Launch(ctx context.Context, in problems.Launch) (problems.Outcome, error) {
	lim := l.limits
	if in.Timeout > 0 {
		lim.WallTime = in.Timeout
	}
	if in.OutputLimit > 0 {
		lim.OutputBytes = in.OutputLimit
	}
	res, err := l.rt.Run(ctx, sandbox.Spec{Args: in.Argv, Env: in.Env, WorkDir: in.Dir, Binds: l.binds, Devices: l.devices, Limits: lim, ResultPipe: true,
		ResultTee: in.Progress, Keep: in.Keep, KeepTo: in.Dir, Mask: l.mask, Loopback: in.Loopback})
	if err != nil {
		return problems.Outcome{}, err
	}
	if res.Verdict == sandbox.VerdictSandboxErr {
		return problems.Outcome{}, fmt.Errorf("sandbox: %s", res.Error)
	}
	out := problems.Outcome{
		ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.Verdict == sandbox.VerdictTimeout,
		OOM: res.Verdict == sandbox.VerdictOOM, Stdout: res.Stdout, Stderr: res.Stderr,
		Truncated: res.Truncated, Result: res.ResultData, Wall: res.Wall,
	}
	if res.Signal != "" {
		out.ExitCode = -1
	}
	return out, nil
}

// sandboxEnv is the whole environment of a sandboxed harness: nothing of
// the host's leaks in, except the timing knobs a problem author may set.
// binDirs go first on PATH (the interpreter's environment, whose ninja
// load_inline runs).
func sandboxEnv(binDirs ...string) []string {
	// The CUDA toolkit's bin is on PATH for nvcc and ncu where it is bound.
	var dirs []string
	for _, d := range binDirs {
		if filepath.IsAbs(d) { // never "" (the current directory) on PATH
			dirs = append(dirs, d)
		}
	}
	path := strings.Join(append(dirs, "/usr/local/bin", "/usr/local/cuda/bin", "/usr/bin", "/bin"), ":")
	env := []string{"PATH=" + path, "HOME=/work", "TMPDIR=/tmp", "LANG=C.UTF-8"}
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "KERNELBOX_BENCH_") {
			env = append(env, e)
		}
	}
	return env
}

// harnessBinds are the default runtime binds plus the interpreter's own
// directories where they lie outside them (a virtual environment in /opt).
func harnessBinds(it *problems.Interpreter, extra []sandbox.Bind) []sandbox.Bind {
	binds := sandbox.DefaultBinds()
	covered := func(dir string) bool {
		for _, b := range binds {
			if dir == b.Source || strings.HasPrefix(dir, strings.TrimSuffix(b.Source, "/")+"/") {
				return true
			}
		}
		return false
	}
	if it != nil {
		for _, d := range it.Dirs {
			if d != "" && !covered(d) {
				binds = append(binds, sandbox.Bind{Source: d})
			}
		}
	}
	return append(binds, extra...)
}

// newOneShotRuntime makes a sandbox runtime whose state lives in a fresh
// directory of its own, so concurrent commands never touch each other's
// containers; the returned func removes it.
func newOneShotRuntime(logger *slog.Logger) (*sandbox.Runtime, func(), error) {
	dir, err := os.MkdirTemp("", "kernelbox-sandbox-")
	if err != nil {
		return nil, nil, err
	}
	rt, err := sandbox.NewRuntime(dir, logger)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return rt, func() {
		if err := rt.Close(); err != nil {
			logger.Warn("close sandbox runtime", "err", err)
		}
		os.RemoveAll(dir)
	}, nil
}

func limitFlags() []cli.Flag {
	d := policies.DefaultLimits()
	return []cli.Flag{
		&cli.StringFlag{Name: "memory", Value: formatBytes(d.Memory), Usage: "memory limit (K, M, G suffixes)"},
		&cli.Int64Flag{Name: "pids", Value: d.Pids, Usage: "process and thread limit"},
		&cli.Float64Flag{Name: "cpus", Value: d.CPUs, Usage: "CPU quota in cores (0: none)"},
		&cli.StringFlag{Name: "cpuset", Usage: "CPUs the run may use, as 0-3,8"},
		&cli.StringFlag{Name: "tmp-size", Value: formatBytes(d.TmpSize), Usage: "size of /tmp, /work and /dev/shm each"},
		&cli.StringFlag{Name: "output-limit", Value: formatBytes(int64(d.OutputBytes)), Usage: "cap on each of stdout and stderr"},
		&cli.StringSliceFlag{Name: "bind", Usage: "extra read-only bind SRC[:DST] (repeatable; append :rw for writable)"},
		deviceFlag(),
	}
}

// deviceFlag() passes host device nodes in by hand; the GPU lease will do it
// for the daemon.
func deviceFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "device", Usage: "a host device node to pass in, such as /dev/nvidia0 (repeatable)"}
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
	var err error
	if l.Memory, err = parseBytes(c.String("memory")); err != nil {
		return l, nil, fmt.Errorf("--memory: %w", err)
	}
	if l.TmpSize, err = parseBytes(c.String("tmp-size")); err != nil {
		return l, nil, fmt.Errorf("--tmp-size: %w", err)
	}
	out, err := parseBytes(c.String("output-limit"))
	if err != nil {
		return l, nil, fmt.Errorf("--output-limit: %w", err)
	}
	l.OutputBytes = int(out)
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
	rt, cleanup, err := newOneShotRuntime(slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return usageError("sandbox run: %v", err)
	}
	defer cleanup()
	devices, err := devicesFrom(c)
	if err != nil {
		return usageError("sandbox run: %v", err)
	}
	res, err := rt.Run(c.Context, sandbox.Spec{
		Args: c.Args().Slice(), Env: sandboxEnv(), WorkDir: c.String("workdir"),
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
	fmt.Fprintf(w, " · wall %s · cpu %s · peak memory %s", res.Wall.Round(time.Millisecond), res.CPU.Round(time.Millisecond), formatBytes(int64(res.PeakMemory)))
	if res.Truncated {
		fmt.Fprint(w, " · output truncated")
	}
	if res.Error != "" {
		fmt.Fprintf(w, "\nerror: %s", res.Error)
	}
	fmt.Fprintln(w)
}

// parseBytes reads 512, 64K, 256M, 8G (powers of 1024).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s, "B"), "i")))
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			mult, s = 1<<10, s[:n-1]
		case 'M':
			mult, s = 1<<20, s[:n-1]
		case 'G':
			mult, s = 1<<30, s[:n-1]
		case 'T':
			mult, s = 1<<40, s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size like 512M or 8G", s)
	}
	return int64(v * float64(mult)), nil
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprintf("%d", n)
}
