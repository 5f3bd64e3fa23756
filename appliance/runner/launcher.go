package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

// SandboxRunner runs one spec in a fresh sandbox: a *sandbox.Runtime, or a
// sandboxtest.Runtime in tests.
type SandboxRunner interface {
	Run(ctx context.Context, s sandbox.Spec) (*sandbox.Result, error)
}

var (
	_ SandboxRunner     = (*sandbox.Runtime)(nil)
	_ problems.Launcher = (*sandboxLauncher)(nil)
)

// LauncherSpec is what every harness process of one launcher gets.
type LauncherSpec struct {
	// Python is the harness interpreter; its directories are bound in
	// where the default binds do not cover them. Nil for a native problem.
	Python *problems.Interpreter
	// Binds are bound in besides the runtime's (the config's, ncu's).
	Binds   []sandbox.Bind
	Devices []sandbox.Device
	Limits  policies.Limits
	// Mask are more /proc paths to hide (the other GPUs').
	Mask []string
}

// NewSandboxLauncher is the one place a sandboxed launcher is put
// together, for the daemon's runs and for `kernelbox eval --sandbox`, so
// that a contestant's local check runs in the sandbox the box uses. It
// returns the launcher and the environment its harness runs with.
func NewSandboxLauncher(rt SandboxRunner, spec LauncherSpec) (problems.Launcher, []string) {
	var bin string
	if spec.Python != nil {
		bin = spec.Python.BinDir
	}
	return &sandboxLauncher{rt: rt, binds: harnessBinds(spec.Python, spec.Binds), devices: spec.Devices,
		limits: spec.Limits, mask: spec.Mask}, SandboxEnv(bin)
}

// sandboxLauncher runs harness processes in the sandbox: problems drives
// the phases, sandbox isolates each one.
type sandboxLauncher struct {
	rt      SandboxRunner
	binds   []sandbox.Bind
	devices []sandbox.Device
	limits  policies.Limits
	mask    []string // more /proc paths to hide (the other GPUs')
}

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
	binds, env := l.binds, in.Env
	if in.Cache != "" {
		if err := ownCacheDir(in.Cache, sandbox.Nobody); err != nil {
			return problems.Outcome{}, err
		}
		// Clipped: l.binds is every launch's, and must not grow this bind.
		binds = append(slices.Clip(l.binds), sandbox.Bind{Source: in.Cache, Destination: SandboxCacheDir, Writable: true})
		env = problems.CacheEnv(env, SandboxCacheDir)
	}
	spec := sandbox.Spec{Args: in.Argv, Env: env, WorkDir: in.Dir, Binds: binds, Devices: l.devices, Limits: lim, ResultPipe: true,
		ResultTee: in.Progress, Keep: in.Keep, KeepTo: in.Dir, Mask: l.mask, Loopback: in.Loopback, Gate: in.Gate}
	if in.Standby != nil {
		spec.ResultTee = nil
		spec.Standby = func(ctx context.Context) (sandbox.Opening, error) {
			o, err := in.Standby(ctx)
			return sandbox.Opening{Files: o.Files, Message: o.Message(), WallTime: o.Timeout, ResultTee: o.Progress}, err
		}
	}
	res, err := l.rt.Run(ctx, spec)
	if err != nil {
		return problems.Outcome{}, err
	}
	if res.Verdict == sandbox.VerdictSandboxErr {
		return problems.Outcome{}, fmt.Errorf("sandbox: %s", res.Error)
	}
	if budgetOOM(res) {
		// Every kill was for the memory all runs share (config budget), not
		// the run's own limit: the others' runs used it, so the attempt is
		// the box's failure, tried again, never the contestant's verdict.
		return problems.Outcome{}, fmt.Errorf("sandbox: the memory budget of all runs together (config budget.memory) ran out, "+
			"and the kernel killed %s of this run", res.OOMKilled[0].Name)
	}
	// A run that reached its wall limit after an OOM kill has the OOM
	// verdict, and is no timeout here: the kill is its cause.
	out := problems.Outcome{
		ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.Verdict == sandbox.VerdictTimeout,
		OOM: res.Verdict == sandbox.VerdictOOM, Stdout: res.Stdout, Stderr: res.Stderr,
		Truncated: res.Truncated, Result: res.ResultData, Wall: res.Wall,
		PeakMemory: res.PeakMemory, MemoryLimit: res.MemoryLimit,
	}
	for _, k := range res.OOMKilled {
		out.OOMKilled = append(out.OOMKilled, problems.KilledProcess{Name: k.Name, PID: k.PID, RSS: k.RSS, Budget: k.Budget})
	}
	if res.Signal != "" {
		out.ExitCode = -1
	}
	return out, nil
}

// budgetOOM says whether a run's OOM kills were all at the shared budget.
func budgetOOM(res *sandbox.Result) bool {
	if res.Verdict != sandbox.VerdictOOM || len(res.OOMKilled) == 0 {
		return false
	}
	for _, k := range res.OOMKilled {
		if !k.Budget {
			return false
		}
	}
	return true
}

// SandboxCacheDir is where a sandboxed run finds its submitter's compile
// caches: Launch.Cache, bound writable (and executable: Triton and
// load_inline load the shared objects they keep there).
const SandboxCacheDir = "/cache"

// ownCacheDir makes dir, a submitter's compile cache on the host, a
// directory that the sandbox's uid owns and that no other uid may enter.
// Its parent is the daemon's (root's, 0700), so no run can put a link in
// dir's place; dir is still checked not to be one before it is handed over.
func ownCacheDir(dir string, uid int) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("compile cache: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("compile cache: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("compile cache: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("compile cache %s: not a directory (%s)", dir, st.Mode().Type())
	}
	if os.Geteuid() != 0 {
		// Only root can give it away, and only root starts sandboxes: a
		// launcher without root runs a fake runtime (tests), whose "runs"
		// are this process's user, the owner already.
		return nil
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != uid || int(sys.Gid) != uid {
		if err := os.Lchown(dir, uid, uid); err != nil {
			return fmt.Errorf("compile cache: %w", err)
		}
	}
	if st.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("compile cache: %w", err)
		}
	}
	return nil
}

// SandboxEnv is the whole environment of a sandboxed harness: nothing of
// the host's leaks in, except the timing knobs a problem author may set.
// binDirs go first on PATH (the interpreter's environment, whose ninja
// load_inline runs).
func SandboxEnv(binDirs ...string) []string {
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

// NewOneShotRuntime makes a sandbox runtime whose state lives in a fresh
// directory of its own, so concurrent commands never touch each other's
// containers; the returned func removes it.
func NewOneShotRuntime(logger *slog.Logger) (*sandbox.Runtime, func(), error) {
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
