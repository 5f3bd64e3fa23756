package problems_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"kernelbox/internal/testutil"
	"kernelbox/problems"
)

// standbyRun is a standby started with ExecLauncher, and a launcher that
// hands Evaluate's one launch to it as the daemon's runner does: Adopt,
// the run's gate, then the Opening.
type standbyRun struct {
	t       *testing.T
	sb      problems.Launch
	handoff chan problems.Opening
	ended   chan standbyEnd
	adopted int
}

type standbyEnd struct {
	out problems.Outcome
	err error
}

func startStandby(t *testing.T, python string, env []string) *standbyRun {
	t.Helper()
	sb, err := problems.StandbyLaunch(t.TempDir(), python, env, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	s := &standbyRun{t: t, sb: sb, handoff: make(chan problems.Opening), ended: make(chan standbyEnd, 1)}
	s.sb.Standby = func(ctx context.Context) (problems.Opening, error) {
		select {
		case o := <-s.handoff:
			return o, nil
		case <-ctx.Done():
			return problems.Opening{}, ctx.Err()
		}
	}
	go func() {
		out, err := problems.ExecLauncher{}.Launch(t.Context(), s.sb)
		s.ended <- standbyEnd{out, err}
	}()
	return s
}

func (s *standbyRun) Launch(ctx context.Context, in problems.Launch) (problems.Outcome, error) {
	o, err := problems.Adopt(s.sb, in)
	if err != nil {
		s.t.Errorf("Adopt refused Evaluate's launch: %v", err)
		return problems.ExecLauncher{}.Launch(ctx, in)
	}
	if err := in.Gate(ctx); err != nil {
		return problems.Outcome{}, err
	}
	s.adopted++
	s.handoff <- o
	end := <-s.ended
	return end.out, end.err
}

// TestStandby_TakesARun: a standby started before its problem was known
// (our harness's files only, torch imported) takes over a vectoradd run
// handed to it at the gate: the honest template passes in test and
// leaderboard mode, the wrong solution fails, and the run's extras show
// that the judge waited at the gate, prepared before it.
func TestStandby_TakesARun(t *testing.T) {
	t.Parallel()
	it := testutil.RequireTorch(t)
	task, err := problems.LoadTask(filepath.Join("library", "vectoradd"))
	if err != nil {
		t.Fatal(err)
	}
	// Short benchmarks: what is tested is who runs them.
	env := append(os.Environ(), "KERNELBOX_BENCH_MAX_REPEATS=5", "KERNELBOX_BENCH_WALL_S=1")
	for _, c := range []struct {
		file   string
		mode   problems.Mode
		passed bool
	}{
		{"templates/torch.py", problems.ModeTest, true},
		{"solutions/wrong/drops_tail.py", problems.ModeTest, false},
		{"templates/torch.py", problems.ModeLeaderboard, true},
	} {
		t.Run(strings.ReplaceAll(c.file, "/", "_")+"_"+string(c.mode), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join("library", "vectoradd", c.file))
			if err != nil {
				t.Fatal(err)
			}
			s := startStandby(t, it.Path, env)
			time.Sleep(500 * time.Millisecond) // the run comes while the standby prepares, or after
			rep, err := problems.Evaluate(t.Context(), s, task, problems.EvalOptions{Mode: c.mode, Python: it.Path, Device: it.Device,
				Env: env, WorkDir: t.TempDir(), Submission: src, OutputLimit: 1 << 20, Gate: func(context.Context) error { return nil }})
			if err != nil {
				t.Fatalf("Evaluate through the standby: %v", err)
			}
			if s.adopted != 1 {
				t.Fatalf("the standby took %d launches, want 1", s.adopted)
			}
			if rep.Passed != c.passed {
				t.Fatalf("passed %v (%s), want %v; stderr %s", rep.Passed, rep.Reason, c.passed, rep.Phases[len(rep.Phases)-1].Stderr)
			}
			if c.mode == problems.ModeLeaderboard && (rep.Score == nil || len(rep.Benchmarks) == 0) {
				t.Errorf("leaderboard run: score %v, %d benchmarks; want a score", rep.Score, len(rep.Benchmarks))
			}
			extra := rep.Phases[0].Result.Extra
			if _, err := strconv.ParseInt(extra["judge-gate"], 10, 64); err != nil {
				t.Errorf("extras %v: no judge-gate (the judge did not wait at its gate)", extra)
			}
		})
	}
}

// TestAdopt_Refuses: a standby takes only a run that starts as it did;
// anything else gets a sandbox of its own, with the reason.
func TestAdopt_Refuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sb, err := problems.StandbyLaunch(dir, "/usr/bin/python3", []string{"PATH=/usr/bin"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	sb.Cache = "/cache/standby"
	run := t.TempDir()
	for _, e := range mustReadDir(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, e))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run, e), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gate := func(context.Context) error { return nil }
	good := problems.Launch{Dir: run, Argv: []string{"/usr/bin/python3", "eval.py", "test", "test.cases.txt"}, Env: slices.Clone(sb.Env),
		OutputLimit: 1000, Cache: "/cache/7", Gate: gate, Timeout: time.Minute}
	o, err := problems.Adopt(sb, good)
	if err != nil || o.Files != run || !slices.Equal(o.Argv, []string{"test", "test.cases.txt"}) || o.Timeout != time.Minute {
		t.Fatalf("Adopt(a run like the standby) = %+v, %v; want its files, arguments and timeout", o, err)
	}
	for name, change := range map[string]func(*problems.Launch){
		"no gate":           func(l *problems.Launch) { l.Gate = nil },
		"another python":    func(l *problems.Launch) { l.Argv = slices.Concat([]string{"/opt/python"}, l.Argv[1:]) },
		"a native harness":  func(l *problems.Launch) { l.Argv = []string{"./eval.out", "test", "x"} },
		"another env":       func(l *problems.Launch) { l.Env = append(slices.Clone(l.Env), "POPCORN_SEED=7") },
		"no cache":          func(l *problems.Launch) { l.Cache = "" },
		"kept files":        func(l *problems.Launch) { l.Keep = []string{"eval.out"} },
		"loopback":          func(l *problems.Launch) { l.Loopback = true },
		"profile mode":      func(l *problems.Launch) { l.Argv = []string{"/usr/bin/python3", "eval.py", "profile", "x"} },
		"another limit":     func(l *problems.Launch) { l.OutputLimit = 5 },
		"another judge.py":  func(l *problems.Launch) { l.Dir = changed(t, run, "judge.py") },
		"no kbutils.py":     func(l *problems.Launch) { l.Dir = without(t, run, "kbutils.py") },
		"a standby already": func(l *problems.Launch) { l.Standby = sb.Standby; l.Gate = nil },
	} {
		in := good
		change(&in)
		if _, err := problems.Adopt(sb, in); err == nil {
			t.Errorf("Adopt(%s) took the run, want it refused", name)
		}
	}
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) < 5 {
		t.Fatalf("standby directory holds %v, want the harness's scripts", names)
	}
	return names
}

// changed is a copy of dir with name's content changed.
func changed(t *testing.T, dir, name string) string {
	return copyEdited(t, dir, func(out string) error {
		return os.WriteFile(filepath.Join(out, name), []byte("# not ours\n"), 0o644)
	})
}

// without is a copy of dir without name.
func without(t *testing.T, dir, name string) string {
	return copyEdited(t, dir, func(out string) error { return os.Remove(filepath.Join(out, name)) })
}

func copyEdited(t *testing.T, dir string, edit func(out string) error) string {
	t.Helper()
	out := t.TempDir()
	if err := os.CopyFS(out, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := edit(out); err != nil {
		t.Fatal(err)
	}
	return out
}
