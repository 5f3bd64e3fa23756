// Package sandboxtest holds a fake of sandbox.Runtime for tests of what
// runs on top of the sandbox (the daemon's runner and service): it records
// every spec and plays back scripted results, exits, timeouts, OOMs and
// outputs, without root, containers or a harness. It is imported only by
// tests; the end-to-end tests that prove a feature use the real runtime.
package sandboxtest

import (
	"context"
	"errors"
	"sync"
	"time"

	"kernelbox/sandbox"
)

// Step is one scripted run.
type Step struct {
	// Result is what the run returns; its ResultData is also written to
	// the spec's ResultTee, as the real runtime streams it.
	Result sandbox.Result
	// Err is returned instead of a result (an invalid spec).
	Err error
	// Hold keeps the run going this long, or until its context ends; a
	// run whose context ends first returns VerdictSandboxErr, as the real
	// runtime does.
	Hold time.Duration
	// Started, when set, is closed as the first run of this step starts:
	// a test waits on it to act while the run holds. (The last step
	// answers every later run; its channel is closed once.)
	Started chan struct{}
}

// Runtime is the fake. Script answers the runs in turn; its last step
// answers every run after that. The zero value answers every run with
// VerdictOK and no output.
type Runtime struct {
	mu     sync.Mutex
	Script []Step
	specs  []sandbox.Spec
}

// Run plays the next step for s.
func (r *Runtime) Run(ctx context.Context, s sandbox.Spec) (*sandbox.Result, error) {
	r.mu.Lock()
	n := len(r.specs)
	r.specs = append(r.specs, s)
	var st Step
	first := false
	switch {
	case len(r.Script) == 0:
		st = Step{Result: sandbox.Result{Verdict: sandbox.VerdictOK}}
	case n < len(r.Script):
		st, first = r.Script[n], true
	default:
		st = r.Script[len(r.Script)-1]
		first = n == len(r.Script)-1
	}
	r.mu.Unlock()
	if st.Started != nil && first {
		close(st.Started)
	}
	if err := ctx.Err(); err != nil { // as the real runtime, which never starts then
		return &sandbox.Result{Verdict: sandbox.VerdictSandboxErr, Error: "run: " + err.Error()}, nil
	}
	if st.Err != nil {
		return nil, st.Err
	}
	if s.Gate != nil {
		// As the real runtime: started, then held at the gate, whose
		// error ends the run with it.
		if err := s.Gate(ctx); err != nil {
			return nil, err
		}
	}
	if st.Hold > 0 {
		t := time.NewTimer(st.Hold)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return &sandbox.Result{Verdict: sandbox.VerdictSandboxErr, Error: "run: " + ctx.Err().Error()}, nil
		}
	}
	res := st.Result
	if s.ResultTee != nil && len(res.ResultData) > 0 {
		_, _ = s.ResultTee.Write(res.ResultData)
	}
	return &res, nil
}

// Specs are the specs run so far, in order.
func (r *Runtime) Specs() []sandbox.Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sandbox.Spec(nil), r.specs...)
}

// OK is a run that exits 0 having written result to the result pipe.
func OK(result string) Step {
	return Step{Result: sandbox.Result{Verdict: sandbox.VerdictOK, ResultData: []byte(result), Wall: time.Millisecond}}
}

// Exit is a run that exits with code, having written result and stderr.
func Exit(code int, result, stderr string) Step {
	return Step{Result: sandbox.Result{Verdict: sandbox.VerdictExit, ExitCode: code, ResultData: []byte(result), Stderr: []byte(stderr)}}
}

// OOM is a run the kernel killed for memory: its python3 was killed at
// the run's 8 GiB limit.
func OOM() Step {
	return Step{Result: sandbox.Result{Verdict: sandbox.VerdictOOM, ExitCode: -1, Signal: "SIGKILL", OOMKills: 1,
		OOMKilled: []sandbox.OOMKill{{PID: 4242, Name: "python3", RSS: 7 << 30}}, PeakMemory: 8 << 30, MemoryLimit: 8 << 30}}
}

// Timeout is a run killed at its wall-time limit.
func Timeout() Step {
	return Step{Result: sandbox.Result{Verdict: sandbox.VerdictTimeout, ExitCode: -1, Signal: "SIGKILL"}}
}

// Broken is a run the sandbox itself could not carry out.
func Broken(why string) Step {
	return Step{Result: sandbox.Result{Verdict: sandbox.VerdictSandboxErr, Error: why}}
}

// ErrInvalid is what a Step's Err may be for a spec the runtime refuses.
var ErrInvalid = errors.New("sandboxtest: invalid spec")
