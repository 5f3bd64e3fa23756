//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/opencontainers/runc/libcontainer"

	"kernelbox/problems"
)

// A run's gate (Spec.Gate, Spec.Standby): how it is passed, what a
// standby learns there, and the CPU weight of a run that waits at it.

// open passes the gate: it waits for Gate (or a standby's work, which it
// adds to /work), then tells the process to go and restarts the wall
// clock, which counts the run from there. Without a gate there is
// nothing to wait for. It returns the run's wall limit.
func (p *process) open(ctx context.Context, s *Spec, opened func()) (time.Duration, error) {
	wall := s.Limits.WallTime
	if p.goW == nil {
		return wall, nil
	}
	defer p.goW.Close()
	var msg []byte
	if s.Standby == nil {
		if err := s.Gate(ctx); err != nil {
			return 0, err
		}
	} else {
		o, err := p.standby(ctx, s)
		if err != nil {
			return 0, err
		}
		if err := problems.AddFiles(s.workBind, o.Files, s.UID, s.GID); err != nil {
			return 0, fmt.Errorf("standby's work: %w", err)
		}
		if o.WallTime > 0 {
			wall = o.WallTime
		}
		p.tee.set(o.ResultTee)
		msg = o.Message
	}
	opened()
	p.began = time.Now()
	// A process that died while it waited gets EPIPE here; its death is
	// what the run reports.
	_, _ = p.goW.Write(append([]byte{1}, msg...))
	return wall, nil
}

// errExitedAtGate is a standby's init exiting before a run came.
var errExitedAtGate = errors.New("the harness exited while it waited at its gate")

// standby waits for a standby's work, giving up when its init exits
// first: a harness that died waiting is never handed a run.
func (p *process) standby(ctx context.Context, s *Spec) (Opening, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-p.exited:
			cancel(errExitedAtGate)
		case <-ctx.Done():
		}
	}()
	o, err := s.Standby(ctx)
	if err != nil && errors.Is(context.Cause(ctx), errExitedAtGate) {
		return o, errExitedAtGate
	}
	return o, err
}

// CPU weights of a run's cgroup: while it waits at its gate, and after.
const (
	waitingWeightV2, runningWeightV2 = "1", "100"  // cpu.weight; 100 is the default
	waitingSharesV1, runningSharesV1 = "2", "1024" // cpu.shares; 1024 is the default
)

// prepareWeight gives a run that waits at its gate the least CPU weight,
// or, once it goes, the default back. While it waits it prepares
// (imports, its workers' start) beside runs that are being timed on the
// same CPUs (a warm start's previous run, another GPU's of its NUMA
// node): it should take CPU time only when they leave some. A failure
// costs only that, and is logged.
func (r *Runtime) prepareWeight(container *libcontainer.Container, waiting bool) {
	state, err := container.State()
	if err != nil {
		r.logger.Warn("container state", "container", container.ID(), "err", err)
		return
	}
	file, value := "cpu.weight", runningWeightV2
	dir, ok := state.CgroupPaths[""]
	if waiting {
		value = waitingWeightV2
	}
	if cgroups.Mode() != cgroups.Unified {
		file, value = "cpu.shares", runningSharesV1
		if waiting {
			value = waitingSharesV1
		}
		dir, ok = state.CgroupPaths["cpu"]
	}
	if !ok {
		return // no CPU controller: nothing to weigh with
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.logger.Warn("set the CPU weight of a waiting run", "container", container.ID(), "file", file, "err", err)
	}
}

// lateWriter passes writes on to a writer set later (a standby's result
// tee), dropping them until then.
type lateWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lateWriter) set(w io.Writer) {
	l.mu.Lock()
	l.w = w
	l.mu.Unlock()
}

func (l *lateWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		_, _ = l.w.Write(b)
	}
	return len(b), nil
}
