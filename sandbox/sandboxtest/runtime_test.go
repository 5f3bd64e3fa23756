package sandboxtest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"kernelbox/sandbox"
)

func TestRuntime_PlaysTheScript(t *testing.T) {
	t.Parallel()
	rt := &Runtime{Script: []Step{OK("check: pass\n"), OOM(), Timeout()}}
	var tee bytes.Buffer
	var verdicts []sandbox.Verdict
	for i := 0; i < 4; i++ {
		res, err := rt.Run(t.Context(), sandbox.Spec{Args: []string{"x"}, ResultTee: &tee})
		if err != nil {
			t.Fatal(err)
		}
		verdicts = append(verdicts, res.Verdict)
	}
	want := []sandbox.Verdict{sandbox.VerdictOK, sandbox.VerdictOOM, sandbox.VerdictTimeout, sandbox.VerdictTimeout}
	for i := range want {
		if verdicts[i] != want[i] {
			t.Errorf("run %d: verdict %s, want %s", i, verdicts[i], want[i])
		}
	}
	if tee.String() != "check: pass\n" || len(rt.Specs()) != 4 {
		t.Errorf("tee %q, %d specs; want the first run's result once and 4 specs", tee.String(), len(rt.Specs()))
	}
}

func TestRuntime_HoldEndsWithContext(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	rt := &Runtime{Script: []Step{{Result: sandbox.Result{Verdict: sandbox.VerdictOK}, Hold: time.Hour, Started: started}}}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	res, err := rt.Run(ctx, sandbox.Spec{})
	if err != nil || res.Verdict != sandbox.VerdictSandboxErr {
		t.Errorf("Run cancelled while holding = %+v, %v; want a sandbox error", res, err)
	}
}

// TestRuntime_LastStepRepeatsOnce: the step that answers every later run
// closes its Started channel only at its first run.
func TestRuntime_LastStepRepeatsOnce(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	rt := &Runtime{Script: []Step{{Result: sandbox.Result{Verdict: sandbox.VerdictOK}, Started: started}}}
	for i := 0; i < 3; i++ {
		if _, err := rt.Run(t.Context(), sandbox.Spec{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-started:
	default:
		t.Error("Started was not closed by the first run")
	}
}
