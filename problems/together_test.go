package problems

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// phasedScript speaks the kernelbox contract: every MODE CASES_FILE pair in
// one process, each phase opened by "phase: MODE". It counts its starts in
// starts.txt, and fails the phase named by $FAIL_AT.
const phasedScript = `#!/bin/sh
echo start >> "$STARTS"
while [ $# -gt 0 ]; do
  mode=$1; cases=$2; shift 2
  echo "phase: ${PHASE_AS:-$mode}" >&3
  if [ "$mode" = test ]; then
    echo "test-count: 1" >&3; echo "test.0.spec: $(cat $cases)" >&3; echo "test.0.status: pass" >&3
  else
    i=0
    while read -r line; do
      echo "benchmark.$i.spec: $line" >&3; echo "benchmark.$i.runs: 3" >&3
      echo "benchmark.$i.mean: $(( (i + 1) * 1000 ))" >&3; i=$((i+1))
    done < $cases
  fi
  if [ "$mode" = "$FAIL_AT" ]; then
    echo "benchmark.0.status: fail" >&3; echo "benchmark.0.error: too slow to be true" >&3
    echo "check: fail" >&3; echo "failing $mode" >&2; exit 112
  fi
  echo "check: pass" >&3
  echo "phase-wall: 5000000" >&3
done
`

func TestEvaluate_KernelboxHarnessRunsPhasesTogether(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, failAt, phaseAs string
		passed                bool
		phases                string // the names of the phases recorded
		reason                string
	}{
		{name: "all pass", passed: true, phases: "test,benchmark,leaderboard"},
		{name: "second phase fails", failAt: "benchmark", phases: "test,benchmark",
			reason: "benchmark phase: wrong result: benchmark 0 (n: 2; seed: 2): too slow to be true"},
		// A phase line that names another phase is not believed: what
		// follows it is no verdict.
		{name: "phase out of order", phaseAs: "leaderboard", phases: "test", reason: "test phase: the harness wrote no verdict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			task := scriptProblem(t, phasedScript, "harness: kernelbox\n")
			starts := filepath.Join(t.TempDir(), "starts.txt")
			env := []string{"PATH=" + os.Getenv("PATH"), "STARTS=" + starts, "FAIL_AT=" + tt.failAt, "PHASE_AS=" + tt.phaseAs}
			rep, err := Evaluate(t.Context(), ExecLauncher{}, task, EvalOptions{
				Mode: ModeLeaderboard, Python: "/bin/sh", Device: "cpu", Env: env,
				WorkDir: t.TempDir(), Submission: []byte("def custom_kernel(d): return d\n"),
			})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, ph := range rep.Phases {
				names = append(names, ph.Name)
			}
			if got := strings.Join(names, ","); rep.Passed != tt.passed || got != tt.phases || !strings.Contains(rep.Reason, tt.reason) {
				t.Errorf("passed %v, phases %s, reason %q; want %v, %s, a reason containing %q", rep.Passed, got, rep.Reason, tt.passed, tt.phases, tt.reason)
			}
			if b, _ := os.ReadFile(starts); string(b) != "start\n" {
				t.Errorf("the harness started %d times, want once", strings.Count(string(b), "start"))
			}
			if tt.passed && (rep.Score == nil || *rep.Score != 1.5e-6 || rep.Phases[0].Wall != 5e6) {
				t.Errorf("score %v, test phase wall %v; want 1.5e-6 s and the harness's 5ms", rep.Score, rep.Phases[0].Wall)
			}
			if tt.failAt != "" && !strings.Contains(rep.Phases[len(rep.Phases)-1].Stderr, "failing") {
				t.Errorf("the failing phase's stderr %q lacks the harness's", rep.Phases[len(rep.Phases)-1].Stderr)
			}
		})
	}
}
