//go:build linux

package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"kernelbox/problems"
)

// Errors of NewRuntime, for hosts or builds that cannot sandbox.
var (
	ErrNotRoot   = errors.New("sandbox: needs root (namespaces, cgroups and uid changes)")
	ErrNoSeccomp = errors.New("sandbox: this binary was built without seccomp support (build with cgo and -tags seccomp, as make build does)")
)

// Runtime runs sandboxes. Its state lives under Root, on a tmpfs:
// libcontainer's state in Root/state and each run's root filesystem in
// Root/runs.
type Runtime struct {
	root         string
	cgroupParent string
	budget       Budget
	logger       *slog.Logger
	mounted      bool // Root's tmpfs is ours to unmount
}

// NewRuntime prepares a runtime rooted at root. It needs root privileges.
// Unless root is on a tmpfs already, it mounts one there; Close unmounts
// it.
func NewRuntime(root string, logger *slog.Logger) (*Runtime, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if !seccompBuilt {
		return nil, ErrNoSeccomp
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	mounted, err := ensureTmpfs(root)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	// A parent named after the root, so that runtimes on different roots
	// (one-shot runtimes, tests) never share one; the daemon names its own.
	r := &Runtime{root: root, cgroupParent: DefaultCgroupParent(root), logger: logger.With("component", "sandbox"), mounted: mounted}
	for _, d := range []string{"state", "runs"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			r.Close()
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	return r, nil
}

// ensureTmpfs puts dir on a tmpfs of its own unless it is on one already
// (a restarted daemon finds the one it mounted before, with the state of
// the runs it left). Every run creates and removes a root skeleton and
// libcontainer's state files; on a journalled disk filesystem that cost 10
// to 25 ms a run on CI's machine (`go test -bench Overhead`), a third of a
// run's overhead. And a run that keeps files has its /work there: on a
// tmpfs its pages are charged to the run's own memory cgroup instead of
// filling the host's disk.
func ensureTmpfs(dir string) (bool, error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // the mount table has the resolved path
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		// Ours if an earlier runtime mounted it here (and died without
		// unmounting): then this one unmounts it at Close.
		ours := false
		err := eachMount(func(point, fstype, source, _ string) bool {
			if point == dir && fstype == "tmpfs" {
				ours = source == tmpfsSource
			}
			return true // the last mount on dir is the one in effect
		})
		return ours, err
	}
	// Exec stays allowed: a kept /work holds compiled programs that run.
	if err := unix.Mount(tmpfsSource, dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return false, fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return true, nil
}

// Close removes the runs' parent cgroup from every hierarchy and unmounts
// the tmpfs NewRuntime mounted. Runs must have ended: a run cgroup left in
// the parent keeps it, and is reported.
func (r *Runtime) Close() error {
	var errs []error
	if err := removeCgroupParent(r.cgroupParent); err != nil {
		errs = append(errs, fmt.Errorf("sandbox: remove cgroup parent %s: %w", r.cgroupParent, err))
	}
	if r.mounted {
		r.mounted = false
		if err := unix.Unmount(r.root, unix.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: unmount %s: %w", r.root, err))
		}
	}
	return errors.Join(errs...)
}

// CleanStale kills and removes the containers and run directories an
// earlier process left (a crash, a reboot), so nothing of theirs runs on,
// and removes the empty run cgroups nothing accounts for any more. It
// returns how many containers it found. Call it before the first Run.
func (r *Runtime) CleanStale() (int, error) {
	entries, err := os.ReadDir(filepath.Join(r.root, "state"))
	if err != nil {
		return 0, fmt.Errorf("clean stale sandboxes: %w", err)
	}
	n := 0
	for _, e := range entries {
		if c, err := libcontainer.Load(filepath.Join(r.root, "state"), e.Name()); err == nil {
			_ = c.Signal(unix.SIGKILL)
			// Destroy refuses a container whose init still lives, and the
			// kill takes effect asynchronously.
			waitStopped(c, 5*time.Second)
			if err := c.Destroy(); err != nil {
				r.logger.Warn("destroy stale container", "container", e.Name(), "err", err)
			}
		}
		_ = os.RemoveAll(filepath.Join(r.root, "state", e.Name()))
		_ = os.RemoveAll(filepath.Join(r.root, "runs", e.Name()))
		n++
	}
	runs, _ := os.ReadDir(filepath.Join(r.root, "runs"))
	for _, e := range runs {
		_ = os.RemoveAll(filepath.Join(r.root, "runs", e.Name()))
	}
	r.removeOrphanCgroups()
	return n, nil
}

func waitStopped(c *libcontainer.Container, limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st, err := c.Status(); err != nil || st == libcontainer.Stopped {
			return
		}
	}
}

// tmpfsSource names the runtime's tmpfs in the mount table, so a restarted
// daemon recognises the one it mounted before.
const tmpfsSource = "kernelbox-sandbox"

// idPrefix starts every run's container id, and so its cgroup's name.
const idPrefix = "kb-"

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return idPrefix + hex.EncodeToString(b[:])
}

// Run runs one spec to its end and returns what happened: start the
// container's init, wait for it (or the wall limit, or ctx), collect its
// output, stats and verdict. An error means the spec was invalid; a
// failure inside the sandbox is a Result with VerdictSandboxErr.
func (r *Runtime) Run(ctx context.Context, s Spec) (*Result, error) {
	s, err := Validate(s)
	if err != nil {
		return nil, err
	}
	// cgroup v1 refuses a child CPU quota above its parent's.
	if b := r.budget.CPUs; b > 0 && (s.Limits.CPUs == 0 || s.Limits.CPUs > b) {
		s.Limits.CPUs = b
	}
	// A run's memory is never above what all runs share: one run that
	// fills it is then killed at its own limit, its own verdict, and not
	// at the budget, which reads as the box's failure and is retried.
	if b := r.budget.Memory; b > 0 && (s.Limits.Memory == 0 || s.Limits.Memory > b) {
		s.Limits.Memory = b
	}
	id := newID()
	runDir := filepath.Join(r.root, "runs", id)
	defer os.RemoveAll(runDir)
	rootfs := filepath.Join(runDir, "rootfs")
	res := &Result{ID: id}
	fail := func(op string, err error) (*Result, error) {
		res.Verdict = VerdictSandboxErr
		res.Error = fmt.Sprintf("%s: %v", op, err)
		return res, nil
	}
	if len(s.Keep) > 0 || s.Standby != nil {
		s.workBind = filepath.Join(runDir, "work")
	}
	if err := buildRootfs(rootfs, &s); err != nil {
		return fail("build root filesystem", err)
	}
	config := configFor(id, rootfs, r.cgroupParent, &s)
	container, err := libcontainer.Create(filepath.Join(r.root, "state"), id, config)
	if err != nil {
		return fail("create container", err)
	}
	defer func() {
		if err := container.Destroy(); err != nil {
			r.logger.Warn("destroy container", "container", id, "err", err)
		}
	}()
	p, op, err := start(container, &s)
	if err != nil {
		return fail(op, err)
	}
	waits := s.Gate != nil || s.Standby != nil
	if waits {
		r.prepareWeight(container, true)
	}
	wall, err := p.open(ctx, &s, func() {
		if waits {
			r.prepareWeight(container, false)
		}
	})
	if err != nil && !errors.Is(err, errExitedAtGate) {
		_ = container.Signal(unix.SIGKILL)
		p.wait(ctx, container, 0, "")
		p.out.drain()
		return nil, fmt.Errorf("gate of run %s: %w", id, err)
	}
	// A standby that died while it waited is reported as a run that
	// exited at once: its exit and stderr say why.
	end := p.wait(ctx, container, wall, r.oomCounter(container))
	res.Wall = time.Since(p.began)
	p.out.drain()
	r.readStats(container, res)
	res.MemoryLimit = uint64(s.Limits.Memory)
	// The count wait saw stands if the cgroup could not be read again.
	res.OOMKills = max(res.OOMKills, end.oomKills)
	if res.OOMKills > 0 {
		res.OOMKilled = oomVictims(id, maxVictims)
	}
	if err := keepFiles(&s); err != nil {
		return fail("keep files", err)
	}
	p.out.collect(res, end)
	if end.cancelled {
		return fail("run", ctx.Err())
	}
	return res, nil
}

// outputs are a run's stdout, stderr and result pipe: pipes of our own,
// read here into capped buffers. Given a plain writer, os/exec would copy
// runc init's output itself and its Wait would wait for that copy, which
// never ends when init's first stage fails while a later stage still
// holds the pipe: container.Run hung there, under load, and the slot with
// it.
type outputs struct {
	stdout, stderr, result *problems.CapWriter
	copies                 sync.WaitGroup
	reads                  []*os.File
	// resultDone closes when the result pipe's copy ends.
	resultDone chan struct{}
	resultRead *os.File
}

func newOutputs(limit int) *outputs {
	return &outputs{stdout: problems.NewCapWriter(limit), stderr: problems.NewCapWriter(limit), result: problems.NewCapWriter(limit),
		resultDone: make(chan struct{})}
}

// pipeTo makes a pipe whose read end is copied to dst; the write end is
// the container's.
func (o *outputs) pipeTo(dst io.Writer) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	o.reads = append(o.reads, r)
	o.copies.Add(1)
	go func() {
		defer o.copies.Done()
		_, _ = io.Copy(dst, r)
	}()
	return w, nil
}

// drain waits for the copies, then cuts off any writer still holding a
// pipe (a process the run left behind outside its namespace).
func (o *outputs) drain() {
	o.drainResult()
	done := make(chan struct{})
	go func() { o.copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	for _, r := range o.reads {
		r.Close() // ends a copy still blocked on a leftover writer
	}
	<-done
}

// drainResult waits a little for the result pipe's copy, then cuts it off.
func (o *outputs) drainResult() {
	if o.resultRead == nil {
		return
	}
	select {
	case <-o.resultDone:
	case <-time.After(2 * time.Second):
		o.resultRead.Close()
		<-o.resultDone
	}
	o.resultRead.Close()
	o.resultRead = nil
}

// process is a container's init, started.
type process struct {
	proc  *libcontainer.Process
	out   *outputs
	began time.Time
	// goW is the gate's end of the go pipe (Spec.Gate, Spec.Standby),
	// nil without one.
	goW *os.File
	// tee is a standby's result tee, set at its opening.
	tee *lateWriter
	// exited closes once init has been reaped; ps is then its state.
	exited chan struct{}
	ps     *os.ProcessState
}

// start starts the container's init with our pipes; on an error, op says
// which step failed and the pipes are already drained.
func start(container *libcontainer.Container, s *Spec) (*process, string, error) {
	out := newOutputs(s.Limits.OutputBytes)
	outW, err := out.pipeTo(out.stdout)
	if err != nil {
		return nil, "stdout pipe", err
	}
	errW, err := out.pipeTo(out.stderr)
	if err != nil {
		outW.Close()
		out.drain()
		return nil, "stderr pipe", err
	}
	proc := &libcontainer.Process{
		Args: s.Args, Env: append([]string(nil), s.Env...), UID: s.UID, GID: s.GID, Cwd: "/work",
		Stdout: outW, Stderr: errW, Init: true,
	}
	var pw *os.File
	if s.ResultPipe {
		if out.resultRead, pw, err = os.Pipe(); err != nil {
			outW.Close()
			errW.Close()
			out.drain()
			return nil, "result pipe", err
		}
		proc.ExtraFiles = []*os.File{pw}
		proc.Env = append(proc.Env, "POPCORN_FD=3")
	}
	var goR, goW *os.File
	if s.Gate != nil || s.Standby != nil {
		if goR, goW, err = os.Pipe(); err != nil {
			outW.Close()
			errW.Close()
			if pw != nil {
				pw.Close()
				out.resultRead.Close()
				out.resultRead = nil
			}
			out.drain()
			return nil, "go pipe", err
		}
		proc.ExtraFiles = append(proc.ExtraFiles, goR)
		proc.Env = append(proc.Env, fmt.Sprintf("KERNELBOX_GO_FD=%d", 2+len(proc.ExtraFiles)))
	}
	began := time.Now()
	runErr := container.Run(proc)
	outW.Close() // the container has its own copies now
	errW.Close()
	if pw != nil {
		pw.Close()
	}
	if goR != nil {
		goR.Close()
	}
	if runErr != nil {
		_ = container.Signal(unix.SIGKILL)
		if out.resultRead != nil {
			out.resultRead.Close()
			out.resultRead = nil
		}
		if goW != nil {
			goW.Close()
		}
		out.drain()
		return nil, "start", runErr
	}
	tee := &lateWriter{}
	if out.resultRead != nil {
		var dst io.Writer = out.result
		switch {
		case s.Standby != nil:
			dst = io.MultiWriter(out.result, tee)
		case s.ResultTee != nil:
			dst = io.MultiWriter(out.result, s.ResultTee)
		}
		go func(r *os.File) {
			defer close(out.resultDone)
			_, _ = io.Copy(dst, r)
		}(out.resultRead)
	}
	p := &process{proc: proc, out: out, began: began, goW: goW, tee: tee, exited: make(chan struct{})}
	go func() {
		p.ps, _ = proc.Wait()
		close(p.exited)
	}()
	return p, "", nil
}

// ending is how a run's init ended.
type ending struct {
	ps                  *os.ProcessState
	timedOut, cancelled bool
	// oomKills is the run's OOM kill count as wait last read it.
	oomKills uint64
}

// wait waits for the init to exit, or kills it at the wall limit, when
// ctx ends, or oomGrace after the kernel first killed one of its
// processes for memory (counted in the oomCounter file oom, "" for
// none). Killing the init of a PID namespace kills every process in it.
func (p *process) wait(ctx context.Context, container *libcontainer.Container, wall time.Duration, oom string) ending {
	var e ending
	select {
	case <-p.exited: // before the timer: an init that died at its gate
		e.ps = p.ps
		return e
	default:
	}
	timer := time.NewTimer(wall)
	defer timer.Stop()
	var poll, grace <-chan time.Time
	if oom != "" {
		ticker := time.NewTicker(oomPoll)
		defer ticker.Stop()
		poll = ticker.C
	}
wait:
	for {
		select {
		case <-p.exited:
			e.ps = p.ps
			return e
		case <-timer.C:
			e.timedOut = true
			break wait
		case <-ctx.Done():
			e.cancelled = true
			break wait
		case <-poll:
			if n, err := readOOMKills(oom); err == nil && n > 0 {
				e.oomKills = n
				poll = nil
				g := time.NewTimer(oomGrace)
				defer g.Stop()
				grace = g.C
			}
		case <-grace:
			break wait
		}
	}
	_ = container.Signal(unix.SIGKILL)
	<-p.exited
	e.ps = p.ps
	return e
}

// readStats fills in the run's peak memory, CPU time and OOM kills.
func (r *Runtime) readStats(container *libcontainer.Container, res *Result) {
	state, err := container.State()
	if err != nil {
		r.logger.Warn("container state", "container", res.ID, "err", err)
		return
	}
	if state.Config.Cgroups == nil {
		return
	}
	st, err := readStats(state.Config.Cgroups.Path, state.CgroupPaths)
	if err != nil {
		r.logger.Warn("read cgroup stats", "container", res.ID, "err", err)
		return
	}
	res.PeakMemory, res.CPU, res.OOMKills = st.peak, st.cpu, st.oom
}

// collect puts the output, the exit and the verdict into res.
func (o *outputs) collect(res *Result, e ending) {
	res.Stdout, res.Stderr, res.ResultData = o.stdout.Bytes(), o.stderr.Bytes(), o.result.Bytes()
	res.Truncated = o.stdout.Dropped()+o.stderr.Dropped()+o.result.Dropped() > 0
	res.ExitCode = -1
	if e.ps != nil {
		res.ExitCode = e.ps.ExitCode()
		if ws, ok := e.ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = unix.SignalName(ws.Signal())
		}
	}
	res.TimedOut = e.timedOut
	switch {
	// An OOM kill outranks the timeout that may follow it: a harness
	// whose worker was killed often waits for it until the wall limit,
	// and the kill is the cause the contestant must see.
	case res.OOMKills > 0:
		res.Verdict = VerdictOOM
	case e.timedOut:
		res.Verdict = VerdictTimeout
	case res.Signal != "":
		res.Verdict = VerdictSignal
	case res.ExitCode != 0:
		res.Verdict = VerdictExit
	case res.Truncated:
		res.Verdict = VerdictOutputLimit
	default:
		res.Verdict = VerdictOK
	}
}

// keepFiles copies the kept files out of a run's work directory: plain
// files only, never through a link the run may have planted.
func keepFiles(s *Spec) error {
	for _, name := range s.Keep {
		src := filepath.Join(s.workBind, name)
		st, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the run did not make it; the next step will say so
		}
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", name)
		}
		f, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		dst, err := os.OpenFile(filepath.Join(s.KeepTo, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, st.Mode().Perm()|0o600)
		if err == nil {
			_, err = io.Copy(dst, f)
			if cerr := dst.Close(); err == nil {
				err = cerr
			}
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// DefaultBinds are the host paths a run needs to start programs: /usr, the
// top-level library directories on hosts where they are not symlinks, and
// the two pieces of /etc the dynamic loader uses: its cache, and the
// alternatives links through which Debian points at BLAS and LAPACK.
func DefaultBinds() []Bind {
	binds := []Bind{{Source: "/usr"}}
	for _, name := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/alternatives", "/etc/ld.so.cache"} {
		if st, err := os.Lstat(name); err == nil && (st.IsDir() || st.Mode().IsRegular()) {
			binds = append(binds, Bind{Source: name})
		}
	}
	return binds
}
