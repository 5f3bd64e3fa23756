package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

// ExitError carries the process exit status out of a command, so main can
// exit once with it.
type ExitError struct {
	Code int
	Err  error // nil when the status alone says it (a failed submission)
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

func usageError(format string, args ...any) error {
	return &ExitError{Code: api.ExitUsage, Err: fmt.Errorf(format, args...)}
}

// ExitCode maps an error returned by the app to a process exit status.
func ExitCode(err error) int {
	if err == nil {
		return api.ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return api.ExitUsage
}

// Version is set at build time with -ldflags "-X kernelbox/appliance/cli.Version=...".
var Version = ""

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

// NewApp builds the kernelbox command line. It writes only to stdout and
// stderr, and never exits the process.
func NewApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "kernelbox",
		Usage:     "a self-hosted GPU-kernel competition box",
		Version:   version(),
		Writer:    stdout,
		ErrWriter: stderr,
		// urfave's default handler calls os.Exit; main exits once instead.
		ExitErrHandler: func(*cli.Context, error) {},
		Commands:       commands(),
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return &ExitError{Code: api.ExitUsage, Err: err}
		},
	}
	return app
}

// commands are the top-level commands, kept few: the box's own (on Linux),
// the local harness, the contestant's and the organiser's.
func commands() []*cli.Command {
	cmds := []*cli.Command{evalCommand(), problemsCommand(), sandboxCommand(), doctorCommand(), serveCommand(), configCommand(), nodeCommand()}
	cmds = append(cmds, accountCommands()...)
	cmds = append(cmds, submitCommand(), submissionsCommand())
	cmds = append(cmds, boardCommands()...)
	return append(cmds, adminCommand())
}

// Run runs the command line with args (args[0] is the program name).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	app := NewApp(stdout, stderr)
	return app.RunContext(ctx, flagsFirst(app, args))
}

// flagsFirst moves the flags of the command line's leaf command in front
// of its arguments: urfave/cli stops parsing flags at the first argument,
// and `kernelbox submit FILE --leaderboard L` must work as documented.
// Everything after "--" stays where it is.
func flagsFirst(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	cmds := app.Commands
	var leaf *cli.Command
	i := 1
	for ; i < len(args); i++ {
		var next *cli.Command
		for _, c := range cmds {
			if c.HasName(args[i]) {
				next = c
			}
		}
		if next == nil {
			break
		}
		leaf, cmds = next, next.Subcommands
	}
	if leaf == nil || len(leaf.Subcommands) > 0 || leaf.SkipFlagParsing {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range leaf.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var flags, positional []string
	rest := args[i:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		if a == "--" {
			positional = append(positional, rest[j:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && takesValue[name] && j+1 < len(rest) {
				j++
				flags = append(flags, rest[j])
			}
			continue
		}
		positional = append(positional, a)
	}
	out := append(append([]string(nil), args[:i]...), flags...)
	return append(out, positional...)
}

func pythonFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "python",
		Usage:   "the Python interpreter for the harness (default: the first python3 on PATH that imports torch)",
		EnvVars: []string{"KERNELBOX_PYTHON"},
	}
}

func findPython(c *cli.Context) (*problems.Interpreter, error) {
	if p := c.String("python"); p != "" {
		it, err := problems.ProbePython(c.Context, p)
		if err != nil {
			return nil, usageError("--python %s: cannot import torch: %v", p, err)
		}
		return it, nil
	}
	it, err := problems.FindPython(c.Context, problems.PythonCandidates())
	if err != nil {
		return nil, &ExitError{Code: api.ExitUsage, Err: fmt.Errorf("%w\ninstall PyTorch (on Debian: apt-get install python3-torch, or run packaging/setup.sh) or pass --python", err)}
	}
	return it, nil
}
