package problems

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// Launch is one harness process to run. The launcher adds POPCORN_FD to Env,
// pointing at a pipe whose other end becomes Outcome.Result.
type Launch struct {
	Dir     string
	Argv    []string
	Env     []string
	Timeout time.Duration
	// OutputLimit caps each of stdout, stderr and the result stream, in bytes.
	OutputLimit int
	// Keep names files the process makes in Dir that later launches need
	// (a compiled binary); a launcher that runs the process elsewhere copies
	// them back into Dir.
	Keep []string
	// Progress, when set, gets the result stream as it is written. It must
	// not fail, and must bound what it keeps.
	Progress io.Writer
	// Loopback: the process's children talk over TCP on loopback (the
	// ranks of a multi-GPU problem); a sandbox must allow IP sockets there.
	Loopback bool
	// Gate, when set, is passed after the process has started and before
	// it may touch the device: the process gets KERNELBOX_GO_FD, a
	// descriptor on which one byte arrives once Gate returns nil, and
	// Timeout counts from then. When Gate fails, the process is killed and
	// Launch returns the error.
	Gate func(context.Context) error
	// Cache is a host directory for the submitter's persistent compile
	// caches (EvalOptions.Cache), "" for none. The launcher makes it
	// writable for the process and points CacheEnv's variables into it.
	Cache string
	// Standby, when set instead of Gate, makes this a standby
	// (standby.go): the process starts in Dir, and waits at its gate
	// until Standby returns its run's Opening. The launcher then adds the
	// Opening's files to the process's working directory and writes its
	// Message after the go byte. Timeout and Progress are the Opening's.
	Standby func(context.Context) (Opening, error)
}

// Outcome is what became of a Launch.
type Outcome struct {
	ExitCode  int    // -1 when the process died of a signal
	Signal    string // the signal's name when it did
	TimedOut  bool
	OOM       bool // the kernel killed a process of it for memory (sandboxed runs)
	Stdout    []byte
	Stderr    []byte
	Truncated bool // some output went past OutputLimit
	Result    []byte
	Wall      time.Duration

	// OOMKilled names the processes killed for memory (OOM), where the
	// launcher learns them; PeakMemory and MemoryLimit are the run's, in
	// bytes, where it measures them (sandboxed runs), else 0.
	OOMKilled   []KilledProcess
	PeakMemory  uint64
	MemoryLimit uint64
}

// Launcher runs harness processes. ExecLauncher runs them on the host; the
// appliance puts the sandbox behind this interface.
type Launcher interface {
	Launch(ctx context.Context, l Launch) (Outcome, error)
}

// DefaultOutputLimit is the per-stream cap when a Launch sets none.
const DefaultOutputLimit = 1 << 20

// ExecLauncher runs the harness as a plain child process of this one, in its
// own process group so that a timeout kills everything it started. It is the
// local loop of `kernelbox eval`: no isolation at all.
type ExecLauncher struct{}

// Launch runs l and waits for it.
func (ExecLauncher) Launch(ctx context.Context, l Launch) (Outcome, error) {
	if len(l.Argv) == 0 {
		return Outcome{}, errors.New("launch: empty command")
	}
	limit := l.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	// The timeout counts from the gate (from the start without one), so it
	// is a timer, not a context deadline.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var expired atomic.Bool

	env := l.Env
	if l.Cache != "" {
		// The process runs as this one's user, who owns what it makes.
		if err := os.MkdirAll(l.Cache, 0o700); err != nil {
			return Outcome{}, fmt.Errorf("launch %s: compile cache: %w", l.Argv[0], err)
		}
		env = CacheEnv(env, l.Cache)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return Outcome{}, fmt.Errorf("launch %s: result pipe: %w", l.Argv[0], err)
	}
	defer pr.Close()

	cmd := exec.CommandContext(runCtx, l.Argv[0], l.Argv[1:]...)
	cmd.Dir = l.Dir
	// ExtraFiles[0] is fd 3 in the child.
	cmd.Env = append(append([]string(nil), env...), "POPCORN_FD=3")
	cmd.ExtraFiles = []*os.File{pw}
	var goR, goW *os.File
	if l.Gate != nil || l.Standby != nil {
		if goR, goW, err = os.Pipe(); err != nil {
			pw.Close()
			return Outcome{}, fmt.Errorf("launch %s: go pipe: %w", l.Argv[0], err)
		}
		defer goW.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, goR) // fd 4
		cmd.Env = append(cmd.Env, "KERNELBOX_GO_FD=4")
	}
	cmd.SysProcAttr = groupAttr()
	cmd.Cancel = func() error {
		// The whole group: the harness's worker and anything user code forked.
		return killGroup(cmd.Process)
	}
	cmd.WaitDelay = 2 * time.Second
	stdout := NewCapWriter(limit)
	stderr := NewCapWriter(limit)
	cmd.Stdout, cmd.Stderr = stdout, stderr

	start := time.Now()
	if err := cmd.Start(); err != nil {
		pw.Close()
		if goR != nil {
			goR.Close()
		}
		return Outcome{}, fmt.Errorf("launch %s: %w", l.Argv[0], err)
	}
	pw.Close()
	var tee io.Writer = l.Progress
	if goR != nil {
		goR.Close()
		msg, err := openGate(ctx, &l)
		if err != nil {
			_ = killGroup(cmd.Process)
			_ = cmd.Wait()
			return Outcome{}, fmt.Errorf("launch %s: gate: %w", l.Argv[0], err)
		}
		tee = l.Progress
		start = time.Now()
		// A process that died while it waited gets EPIPE; its end is
		// what the outcome reports.
		_, _ = goW.Write(append([]byte{1}, msg...))
		goW.Close()
	}
	if l.Timeout > 0 {
		timer := time.AfterFunc(l.Timeout, func() {
			expired.Store(true)
			cancel()
		})
		defer timer.Stop()
	}
	result := NewCapWriter(limit)
	var dst io.Writer = result
	if tee != nil {
		dst = io.MultiWriter(result, tee)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_, _ = io.Copy(dst, pr)
	}()
	waitErr := cmd.Wait()
	// Something that left the process group could still hold the pipe open;
	// do not wait for it forever.
	select {
	case <-readDone:
	case <-time.After(2 * time.Second):
		pr.Close()
		<-readDone
	}
	// Whatever the group left behind dies with it.
	_ = killGroup(cmd.Process)

	out := Outcome{
		Stdout:    stdout.Bytes(),
		Stderr:    stderr.Bytes(),
		Result:    result.Bytes(),
		Truncated: stdout.Dropped() > 0 || stderr.Dropped() > 0 || result.Dropped() > 0,
		Wall:      time.Since(start),
		TimedOut:  expired.Load() && ctx.Err() == nil,
	}
	if ps := cmd.ProcessState; ps != nil {
		out.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.ExitCode = -1
			out.Signal = ws.Signal().String()
		}
	}
	if ctx.Err() != nil {
		return out, fmt.Errorf("launch %s: %w", l.Argv[0], ctx.Err())
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !out.TimedOut && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return out, fmt.Errorf("launch %s: %w", l.Argv[0], waitErr)
	}
	return out, nil
}

// openGate passes a launch's gate: Gate, or a standby's wait for its
// run, whose files it adds to the working directory (l then takes the
// run's timeout and progress writer). It returns what follows the go byte.
func openGate(ctx context.Context, l *Launch) ([]byte, error) {
	if l.Standby == nil {
		return nil, l.Gate(ctx)
	}
	o, err := l.Standby(ctx)
	if err != nil {
		return nil, err
	}
	if err := AddFiles(l.Dir, o.Files, -1, -1); err != nil {
		return nil, err
	}
	l.Timeout, l.Progress = o.Timeout, o.Progress
	return o.Message(), nil
}

// envWith returns env with key set to value, replacing an earlier entry.
func envWith(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	prefix := key + "="
	for _, e := range env {
		if len(e) >= len(prefix) && e[:len(prefix)] == prefix {
			continue
		}
		out = append(out, e)
	}
	return append(out, prefix+value)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
