package problems

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// scriptProblem is a problem whose "harness" is a shell script, so the
// pipeline and ExecLauncher are tested without Python.
func scriptProblem(t *testing.T, script string, extra string) *Task {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "eval.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	yml := `files:
  - {name: submission.py, source: "@SUBMISSION@"}
  - {name: eval.sh, source: eval.sh}
lang: py
config: {main: eval.sh}
tests: [{n: 1, seed: 1}]
benchmarks: [{n: 2, seed: 2}, {n: 3, seed: 3}]
ranking_by: mean
` + extra
	if err := os.WriteFile(filepath.Join(dir, "task.yml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	task, err := LoadTask(dir)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// A harness that passes everything and reports one timing per case.
const passingScript = `#!/bin/sh
mode=$1
if [ "$mode" = test ]; then
  echo "test-count: 1" >&3; echo "test.0.spec: $(cat $2)" >&3; echo "test.0.status: pass" >&3
else
  i=0
  while read -r line; do
    echo "benchmark.$i.spec: $line" >&3; echo "benchmark.$i.runs: 3" >&3
    echo "benchmark.$i.mean: $(( (i + 1) * 1000 ))" >&3; i=$((i+1))
  done < $2
fi
echo "seed=${POPCORN_SEED:-none}"
echo "check: pass" >&3
`

func evalScript(t *testing.T, task *Task, mode Mode, seed *int64) *Report {
	t.Helper()
	rep, err := Evaluate(t.Context(), ExecLauncher{}, task, EvalOptions{
		Mode: mode, Python: "/bin/sh", Device: "cpu", Env: []string{"PATH=" + os.Getenv("PATH")},
		WorkDir: t.TempDir(), Submission: []byte("def custom_kernel(d): return d\n"), Seed: seed,
	})
	if err != nil {
		t.Fatalf("Evaluate(%s) = %v", mode, err)
	}
	return rep
}

func TestEvaluate_LeaderboardPhases(t *testing.T) {
	t.Parallel()
	seed := int64(77)
	rep := evalScript(t, scriptProblem(t, passingScript, ""), ModeLeaderboard, &seed)
	if !rep.Passed {
		t.Fatalf("Passed = false (%s)", rep.Reason)
	}
	var names []string
	for _, ph := range rep.Phases {
		names = append(names, ph.Name)
		if !strings.Contains(ph.Stdout, "seed=77") {
			t.Errorf("phase %s stdout %q: POPCORN_SEED not passed", ph.Name, ph.Stdout)
		}
	}
	if got := strings.Join(names, ","); got != "test,benchmark,leaderboard" {
		t.Errorf("phases = %s, want test,benchmark,leaderboard", got)
	}
	// mean of 1000 ns and 2000 ns.
	if rep.Score == nil || *rep.Score != 1.5e-6 {
		t.Errorf("Score = %v, want 1.5e-6 s", rep.Score)
	}
	if len(rep.Tests) != 1 || len(rep.Benchmarks) != 2 {
		t.Errorf("report has %d tests and %d benchmarks, want 1 and 2", len(rep.Tests), len(rep.Benchmarks))
	}
}

func TestEvaluate_RankingLastUsesLastBenchmark(t *testing.T) {
	t.Parallel()
	task := scriptProblem(t, passingScript, "")
	task.RankingBy = RankLast
	rep := evalScript(t, task, ModeBenchmark, nil)
	if len(rep.Benchmarks) != 1 || rep.Benchmarks[0].Spec != "n: 3; seed: 3" {
		t.Errorf("benchmarks = %+v, want only the last case", rep.Benchmarks)
	}
}

func TestEvaluate_Failures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, script, extra, reason string
		exit                        int
		phases                      int
	}{
		{"wrong result stops the pipeline", "#!/bin/sh\necho 'test.0.status: fail' >&3\necho 'test.0.message: off by one' >&3\necho 'check: fail' >&3\nexit 112\n",
			"", "wrong result: test 0 (): off by one", 112, 1},
		{"no verdict", "#!/bin/sh\nexit 0\n", "", "the harness wrote no verdict", 0, 1},
		{"crash", "#!/bin/sh\necho boom >&2\nkill -SEGV $$\n", "", "harness killed by segmentation fault", -1, 1},
		{"garbage on the pipe", "#!/bin/sh\necho 'nonsense' >&3\n", "", "is not key: value", 0, 1},
		{"hang past the timeout", "#!/bin/sh\nsleep 60 &\nwait\n", "test_timeout: 1\n", "timed out", ExitTimeout, 1},
		// KernelBot's eval.py without a GPU: the spec, then a traceback.
		{"dies mid-test", "#!/bin/sh\necho 'test-count: 1' >&3\necho 'test.0.spec: n: 1; seed: 1' >&3\n" +
			"echo 'Traceback (most recent call last):' >&2\necho 'RuntimeError: Device type CUDA is not supported' >&2\nexit 1\n",
			"", "exit status 1: test 0 (n: 1; seed: 1) did not finish (RuntimeError: Device type CUDA is not supported)", 1, 1},
		// princeton's: a top-level error key and a failed check.
		{"harness error key", "#!/bin/sh\necho 'check: fail' >&3\necho 'error: No CUDA GPU available.' >&3\necho noise >&2\nexit 112\n",
			"", "wrong result (No CUDA GPU available.)", 112, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			rep := evalScript(t, scriptProblem(t, tt.script, tt.extra), ModeLeaderboard, nil)
			if rep.Passed {
				t.Fatal("Passed = true")
			}
			if len(rep.Phases) != tt.phases {
				t.Errorf("%d phases ran, want %d", len(rep.Phases), tt.phases)
			}
			ph := rep.Phases[0]
			if ph.ExitCode != tt.exit || !strings.Contains(rep.Reason, tt.reason) {
				t.Errorf("exit %d, reason %q; want %d and a reason containing %q", ph.ExitCode, rep.Reason, tt.exit, tt.reason)
			}
			if time.Since(start) > 20*time.Second {
				t.Errorf("took %v: a timeout did not kill the process group", time.Since(start))
			}
		})
	}
}

func TestExecLauncher_OutputCap(t *testing.T) {
	t.Parallel()
	out, err := ExecLauncher{}.Launch(t.Context(), Launch{
		Dir: t.TempDir(), Argv: []string{"/bin/sh", "-c", "head -c 5000000 /dev/zero; echo 'check: pass' >&3"}, OutputLimit: 1000,
	})
	if err != nil {
		t.Fatalf("Launch() = %v", err)
	}
	if len(out.Stdout) != 1000 || !out.Truncated {
		t.Errorf("stdout %d bytes, truncated %v; want 1000 and true", len(out.Stdout), out.Truncated)
	}
	if string(out.Result) != "check: pass\n" {
		t.Errorf("Result = %q", out.Result)
	}
}

func TestExecLauncher_CancelKillsGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := ExecLauncher{}.Launch(ctx, Launch{Dir: t.TempDir(), Argv: []string{"/bin/sh", "-c", "sleep 30 & sleep 30"}})
	if err == nil {
		t.Error("Launch() after cancel = nil error")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Launch() returned after %v", d)
	}
}

// TestJudgePhase_OOM: a phase in which the kernel killed a process for
// memory fails as out of memory, naming what the launcher knows of it,
// even when the harness then waited to its time limit (issue 38); a
// timeout without an OOM kill stays a timeout.
func TestJudgePhase_OOM(t *testing.T) {
	t.Parallel()
	const died = "test-count: 1\ntest.0.spec: n: 1\ntest.0.status: fail\ntest.0.error: the submission's process was killed by SIGKILL\ncheck: fail\n"
	for _, tt := range []struct {
		name   string
		out    Outcome
		reason string
		exit   int
	}{
		{name: "named", out: Outcome{OOM: true, ExitCode: ExitValidation, Result: []byte(died),
			OOMKilled:  []KilledProcess{{Name: "python3", PID: 24849, RSS: 300 << 20}, {Name: "python3", PID: 24850}},
			PeakMemory: 512 << 20, MemoryLimit: 512 << 20},
			reason: "ran out of memory: the kernel killed python3 (pid 24849 on the host, holding 300 MiB) and 1 more at the run's 512 MiB memory limit (the run's peak: 512 MiB): test 0 (n: 1): the submission's process was killed by SIGKILL",
			exit:   ExitValidation},
		// Killed by the sandbox's wall clock after the kill: no timeout.
		{name: "then hung", out: Outcome{OOM: true, ExitCode: -1, Signal: "SIGKILL", PeakMemory: 16 << 30, MemoryLimit: 16 << 30},
			reason: "ran out of memory: the kernel killed a process of the run at the run's 16.0 GiB memory limit (the run's peak: 16.0 GiB)", exit: -1},
		{name: "also timed out", out: Outcome{OOM: true, TimedOut: true, ExitCode: -1, Signal: "SIGKILL"},
			reason: "ran out of memory: the kernel killed a process of the run at the memory limit", exit: -1},
		{name: "budget", out: Outcome{OOM: true, ExitCode: -1, OOMKilled: []KilledProcess{{Name: "python3", PID: 7, Budget: true}}, MemoryLimit: 8 << 30},
			reason: "ran out of memory: the kernel killed python3 (pid 7 on the host) at the memory budget the box shares among its runs", exit: -1},
		{name: "timeout alone", out: Outcome{TimedOut: true, ExitCode: -1, Signal: "SIGKILL", PeakMemory: 100 << 20, MemoryLimit: 8 << 30},
			reason: "timed out", exit: ExitTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ph := judgePhase("test", tt.out, 1)
			if ph.Passed || ph.OOM != tt.out.OOM || !strings.HasPrefix(ph.Reason, tt.reason) || ph.ExitCode != tt.exit {
				t.Errorf("judgePhase() = passed %v, oom %v, exit %d, reason %q;\nwant oom %v, exit %d, a reason starting %q",
					ph.Passed, ph.OOM, ph.ExitCode, ph.Reason, tt.out.OOM, tt.exit, tt.reason)
			}
		})
	}
}
