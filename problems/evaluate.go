package problems

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Mode is what an evaluation does with a submission.
type Mode string

// The four modes a contestant can ask for.
const (
	ModeTest        Mode = "test"        // correctness on the tests
	ModeBenchmark   Mode = "benchmark"   // timings of the benchmarks
	ModeLeaderboard Mode = "leaderboard" // test, benchmark, then ranked benchmark with re-checks
	ModeProfile     Mode = "profile"     // one profiled call per benchmark
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeTest, ModeBenchmark, ModeLeaderboard, ModeProfile:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q: use test, benchmark, leaderboard or profile", s)
}

// EvalOptions configure one evaluation.
type EvalOptions struct {
	Mode Mode
	// Python is the interpreter for lang py problems.
	Python string
	// Device is the backend the harness will find: "cpu" or "cuda".
	Device string
	// Seed, when set, is the secret seed (POPCORN_SEED) of a private run.
	Seed *int64
	// Env is the environment the harness starts from.
	Env []string
	// WorkDir is an empty directory the evaluation may fill.
	WorkDir string
	// Submission is the contestant's file, and SubmissionName its name:
	// an archive's (IsArchive) is unpacked in place of the one file.
	Submission     []byte
	SubmissionName string
	// NVCC compiles lang cu problems; "nvcc" when empty.
	NVCC string
	// Arch names the GPU a lang cu build is for (its type: nvcc builds
	// for the GPU at hand), part of its compile cache key; "" keeps the
	// build out of the cache.
	Arch string
	// OutputLimit caps each captured stream of each phase.
	OutputLimit int
	// OnPhase, when set, is called with each phase as it ends: the daemon
	// streams it to whoever watches the submission.
	OnPhase func(Phase)
	// OnTest, when set, is called with each test as the harness reports it,
	// before its phase ends (from the launcher's goroutine).
	OnTest func(phase string, t TestResult)
	// Profiler, when set, runs profile mode under Nsight Compute; without
	// it the harness prints PyTorch's profiler table.
	Profiler *Profiler
	// Ceilings, when set, are the device's peak rates (a GPU's datasheet,
	// the CPU backend's measured bandwidth): with the task's floor they
	// bound each benchmark's time from below (a PHYSICS_FLOOR flag).
	Ceilings *Ceilings
	// FloorSlack is the fraction of the floor a time may reach before it is
	// impossible; 0 means DefaultFloorSlack.
	FloorSlack float64
	// GPUs is how many GPUs a multi-GPU problem's run has (POPCORN_GPUS),
	// as the queue allocated them; 0 means as many as its cases need.
	GPUs int
	// Cache is a host directory for this submitter's persistent compile
	// caches (CacheEnv), "" for none: each launch gets it (Launch.Cache),
	// so a resubmission finds what an earlier run built.
	Cache string
	// Gate, when set, returns once the device is this run's (the runner's
	// GPU freed, gated and sampled); an error ends the evaluation with it.
	// Evaluate calls it once, before the first harness launch: our Python
	// harness is launched first and waits for it (a warm start, see
	// Launch.Gate); any other is launched after it.
	Gate func(context.Context) error

	gate *gateOnce // the run's one pass of Gate
}

// warmStarts says whether t's harness waits for the gate itself
// (KERNELBOX_GO_FD), preparing before it: ours, in Python. A KernelBot
// harness or a compiled one would touch the device at once.
func warmStarts(t *Task) bool {
	return !t.onePhaseAProcess() && t.Lang == LangPython
}

// gateOnce passes EvalOptions.Gate at most once per evaluation.
type gateOnce struct {
	fn     func(context.Context) error
	passed bool
}

// attach readies launch for a gated run: a launch of a harness that
// waits for the gate itself (warm) carries it; before any other the gate
// is passed here. Launches after the first pass go at once.
func (g *gateOnce) attach(ctx context.Context, launch *Launch, waits bool) error {
	if g == nil || g.fn == nil || g.passed {
		return nil
	}
	g.passed = true
	if waits {
		launch.Gate = g.fn
		return nil
	}
	return g.fn(ctx)
}

// DefaultFloorSlack: a time under half the physics floor is impossible,
// even allowing for writes still in L2 when the end event runs and for a
// formula that counts a little more than a clever kernel must move.
const DefaultFloorSlack = 0.5

// Phase is one harness run of an evaluation.
type Phase struct {
	Name      string        `json:"name"` // test, benchmark, leaderboard, profile or compile
	Passed    bool          `json:"passed"`
	ExitCode  int           `json:"exit_code"`
	Signal    string        `json:"signal,omitempty"`
	TimedOut  bool          `json:"timed_out,omitempty"`
	OOM       bool          `json:"oom,omitempty"`    // a process of it was killed for memory
	Reason    string        `json:"reason,omitempty"` // why it did not pass
	Wall      time.Duration `json:"wall_ns"`
	Result    *Result       `json:"result,omitempty"`
	Stdout    string        `json:"stdout,omitempty"`
	Stderr    string        `json:"stderr,omitempty"`
	Truncated bool          `json:"truncated,omitempty"`
}

// Report is the outcome of an evaluation.
type Report struct {
	Problem    string            `json:"problem"`
	Mode       Mode              `json:"mode"`
	Device     string            `json:"device"`
	Passed     bool              `json:"passed"`
	Reason     string            `json:"reason,omitempty"`
	Tests      []TestResult      `json:"tests"`
	Benchmarks []BenchmarkResult `json:"benchmarks"`
	// Score is in seconds, lower being better; nil unless a leaderboard run
	// passed.
	Score *float64 `json:"score"`
	// ScoreErr is the score's standard error in seconds (ScoreErr), when
	// the benchmarks gave theirs.
	ScoreErr  *float64  `json:"score_err,omitempty"`
	RankingBy RankingBy `json:"ranking_by"`
	// TimedBy says whose harness timed and judged the run: TimedByJudge
	// (ours), or TimedByProblem (the problem's own, in the submission's
	// process: less trusted). Empty in reports stored before it existed.
	TimedBy string  `json:"timed_by,omitempty"`
	Phases  []Phase `json:"phases"`
	// Profile is profile mode's Nsight Compute report, when it ran under ncu.
	Profile *ProfileResult `json:"profile,omitempty"`
	// Flags are what the timings themselves give away, for an organiser to
	// look at: a time faster than the GPU can physically go, work left
	// running after the calls returned.
	Flags []Flag `json:"flags,omitempty"`
}

// HarnessFault is the reason of the first phase whose harness failed
// through no fault of the submission (exit 115: the runtime, the
// problem's reference or the judge itself broke), or "". Such a run says
// nothing about the submission: a runner tries it again, never stores it
// as the contestant's verdict.
func (r *Report) HarnessFault() string {
	for _, ph := range r.Phases {
		if ph.ExitCode == ExitHarness && !ph.Passed {
			return fmt.Sprintf("%s phase: %s", ph.Name, ph.Reason)
		}
	}
	return ""
}

// Flag is one suspicion about a run's timings.
type Flag struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// The rules of Flag.
const (
	// FlagPhysicsFloor: a benchmark's mean under its physics floor.
	FlagPhysicsFloor = "PHYSICS_FLOOR"
	// The judge's own, which arrive as flag.N lines (judge.py,
	// Judge.check_timing and Judge.recheck_clock): a net time at or below
	// zero, the clock's offset after the run away from the one before it.
	// Named here for what reads a report, as the harness spells them.
	FlagNetNonPositive = "NET_NONPOSITIVE"
	FlagClockDrift     = "CLOCK_DRIFT"
)

// Materialize writes the task's files into dir, the submission in place of
// the placeholder; a submission whose name is an archive's is unpacked
// there instead (CheckArchive says it holds the placeholder's file). Where
// our judge takes the place of a KernelBot problem's harness, its files
// are written last, over the problem's eval.py.
func Materialize(t *Task, submission []byte, name, dir string) error {
	if err := materializeTask(t, submission, name, dir); err != nil {
		return err
	}
	if t.lendsJudge() {
		return writeJudge(dir)
	}
	return nil
}

func materializeTask(t *Task, submission []byte, name, dir string) error {
	if IsArchive(name) {
		files, err := UnpackArchive(submission, name)
		if err == nil {
			err = t.CheckArchive(files)
		}
		if err != nil {
			return fmt.Errorf("materialize %s: %w", name, err)
		}
		for _, f := range files {
			dst := filepath.Join(dir, filepath.FromSlash(f.Name))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return fmt.Errorf("materialize %s: %w", f.Name, err)
			}
			if err := os.WriteFile(dst, f.Data, 0o644); err != nil {
				return fmt.Errorf("materialize %s: %w", f.Name, err)
			}
		}
	}
	for _, f := range t.Files {
		if f.Source == SubmissionPlaceholder && IsArchive(name) {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("materialize %s: %w", f.Name, err)
		}
		data := submission
		if f.Source != SubmissionPlaceholder {
			var err error
			data, err = os.ReadFile(filepath.Join(t.Dir, filepath.FromSlash(f.Source)))
			if err != nil {
				return fmt.Errorf("materialize %s: %w", f.Name, err)
			}
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("materialize %s: %w", f.Name, err)
		}
	}
	return nil
}

// Evaluate runs a submission through the phases of opts.Mode, stopping at the
// first phase that fails, as KernelBot's runner does. An error means the
// evaluation itself could not be carried out; a failing submission is a
// Report with Passed false.
func Evaluate(ctx context.Context, l Launcher, t *Task, opts EvalOptions) (*Report, error) {
	if opts.WorkDir == "" {
		return nil, errors.New("evaluate: no work directory")
	}
	if t.Lang == LangPython && opts.Python == "" {
		return nil, errors.New("evaluate: no Python interpreter")
	}
	steps, err := phasesOf(t, opts)
	if err != nil {
		return nil, err
	}
	if err := Materialize(t, opts.Submission, opts.SubmissionName, opts.WorkDir); err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", t.Name, err)
	}
	rep := &Report{Problem: t.Name, Mode: opts.Mode, Device: opts.Device, RankingBy: t.RankingBy, TimedBy: t.TimedBy(),
		Tests: []TestResult{}, Benchmarks: []BenchmarkResult{}}
	entry := []string{opts.Python, t.Config.Main}
	if t.lendsJudge() {
		entry[1] = "eval.py" // ours, whatever the problem's harness was called
	}
	if t.Lang == LangCUDA {
		ph, err := compileCUDA(ctx, l, t, opts)
		if err != nil {
			return nil, err
		}
		rep.Phases = append(rep.Phases, ph)
		if opts.OnPhase != nil {
			opts.OnPhase(ph)
		}
		if !ph.Passed {
			rep.Reason = ph.Reason
			return rep, nil
		}
		entry = []string{"./eval.out"}
	}
	env := harnessEnv(t, opts)
	opts.gate = &gateOnce{fn: opts.Gate}
	if !t.onePhaseAProcess() && len(steps) > 1 {
		done, err := runTogether(ctx, l, t, opts, rep, steps, entry, env)
		if err != nil {
			return nil, err
		}
		if done {
			return rep, nil
		}
	} else {
		for _, s := range steps {
			done, err := runPhase(ctx, l, t, opts, rep, s, entry, env)
			if err != nil {
				return nil, err
			}
			if done {
				return rep, nil
			}
		}
	}
	if err := applyFloor(t, opts, rep); err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", t.Name, err)
	}
	rep.Passed = true
	if opts.Mode == ModeLeaderboard {
		score, err := Score(t.RankingBy, rep.Benchmarks)
		if err != nil {
			rep.Passed = false
			rep.Reason = err.Error()
			return rep, nil
		}
		rep.Score = &score
		if e := ScoreErr(t.RankingBy, rep.Benchmarks); e > 0 {
			rep.ScoreErr = &e
		}
	}
	return rep, nil
}

// phase is one harness run of a mode: its name (the harness's mode
// argument), its cases and its time limit.
type phase struct {
	name    string
	cases   []Case
	timeout time.Duration
}

// phasesOf are the harness runs a mode makes, in order.
func phasesOf(t *Task, opts EvalOptions) ([]phase, error) {
	benches := t.BenchmarksFor(opts.Device)
	if t.RankingBy == RankLast || t.RankingBy == "" {
		// KernelBot ranks on the last (largest) shape only and writes only
		// that line for the timed modes.
		benches = benches[len(benches)-1:]
	}
	switch opts.Mode {
	case ModeTest:
		return []phase{{"test", t.Tests, t.TestTimeout}}, nil
	case ModeBenchmark:
		return []phase{{"benchmark", benches, t.BenchmarkTimeout}}, nil
	case ModeLeaderboard:
		return []phase{{"test", t.Tests, t.TestTimeout}, {"benchmark", benches, t.BenchmarkTimeout},
			{"leaderboard", benches, t.RankedTimeout}}, nil
	case ModeProfile:
		return []phase{{"profile", benches, t.BenchmarkTimeout}}, nil
	}
	return nil, fmt.Errorf("evaluate: unknown mode %q", opts.Mode)
}

// harnessEnv is the harness's environment: the caller's, unbuffered
// Python, the secret seed and, for a multi-GPU problem, its GPU count.
func harnessEnv(t *Task, opts EvalOptions) []string {
	env := append([]string(nil), opts.Env...)
	env = envWith(env, "PYTHONUNBUFFERED", "1")
	env = envWith(env, "PYTHONDONTWRITEBYTECODE", "1")
	if opts.Seed != nil {
		env = envWith(env, "POPCORN_SEED", itoa(*opts.Seed))
	}
	if t.MultiGPU {
		// KernelBot's name: the harness starts each case's world_size ranks.
		gpus := opts.GPUs
		if gpus <= 0 {
			gpus = t.WorldSize(opts.Device)
		}
		env = envWith(env, "POPCORN_GPUS", itoa(int64(gpus)))
	}
	return env
}

// runPhase launches one phase and records it in rep; done says the
// evaluation ends here (the phase failed, with rep.Reason saying why).
func runPhase(ctx context.Context, l Launcher, t *Task, opts EvalOptions, rep *Report, s phase, entry, env []string) (done bool, err error) {
	casesName := s.name + ".cases.txt"
	if err := os.WriteFile(filepath.Join(opts.WorkDir, casesName), []byte(FormatCases(s.cases)), 0o644); err != nil {
		return true, fmt.Errorf("evaluate %s: write cases: %w", t.Name, err)
	}
	argv := append(append([]string(nil), entry...), s.name, casesName)
	launch := Launch{Dir: opts.WorkDir, Argv: argv, Env: env, Timeout: s.timeout, OutputLimit: opts.OutputLimit, Loopback: t.MultiGPU,
		Cache: opts.Cache}
	profiled := s.name == "profile" && opts.Profiler != nil
	if profiled {
		launch.Argv = opts.Profiler.recordArgv(argv, t.Lang == LangPython)
		launch.Env = envWith(append([]string(nil), env...), "POPCORN_NCU", "1")
		launch.Keep = []string{ProfileFile}
	}
	if s.name == "test" {
		launch.Progress = testsAsTheyCome(opts)
	}
	if err := opts.gate.attach(ctx, &launch, warmStarts(t) && !profiled); err != nil {
		return true, fmt.Errorf("evaluate %s: %s phase: %w", t.Name, s.name, err)
	}
	out, err := l.Launch(ctx, launch)
	if err != nil {
		return true, fmt.Errorf("evaluate %s: %s phase: %w", t.Name, s.name, err)
	}
	if done := record(opts, rep, s, judgePhase(s.name, out, len(s.cases))); done || !profiled {
		return done, nil
	}
	if rep.Profile, err = opts.Profiler.summarize(ctx, l, opts.WorkDir, env, opts.OutputLimit); err != nil {
		return true, fmt.Errorf("evaluate %s: profile summary: %w", t.Name, err)
	}
	return false, nil
}

// testsAsTheyCome reports each test of a test phase to opts.OnTest as the
// harness writes it, or is nil when nobody watches.
func testsAsTheyCome(opts EvalOptions) io.Writer {
	if opts.OnTest == nil {
		return nil
	}
	budget := opts.OutputLimit // what the launcher keeps of the stream
	if budget <= 0 {
		budget = DefaultOutputLimit
	}
	return newTestProgress(budget, func(t TestResult) { opts.OnTest("test", t) })
}

// record adds one judged phase to rep and tells its watcher; done says
// the evaluation ends here.
func record(opts EvalOptions, rep *Report, s phase, ph Phase) (done bool) {
	rep.Phases = append(rep.Phases, ph)
	if opts.OnPhase != nil {
		opts.OnPhase(ph)
	}
	if ph.Result != nil {
		rep.Flags = append(rep.Flags, ph.Result.Flags...)
		if s.name == "test" {
			rep.Tests = ph.Result.Tests
		} else {
			rep.Benchmarks = ph.Result.Benchmarks
		}
	}
	if !ph.Passed {
		rep.Reason = fmt.Sprintf("%s phase: %s", s.name, ph.Reason)
		return true
	}
	return false
}

// judgePhase decides whether one harness run passed and why not.
func judgePhase(name string, out Outcome, ncases int) Phase {
	ph := Phase{Name: name, ExitCode: out.ExitCode, Signal: out.Signal, TimedOut: out.TimedOut, OOM: out.OOM, Wall: out.Wall,
		Stdout: string(out.Stdout), Stderr: string(out.Stderr), Truncated: out.Truncated}
	res, perr := ParseResult(bytes.NewReader(out.Result))
	if perr == nil {
		ph.Result = res
	}
	switch {
	// Before the timeout: a harness whose worker the kernel killed may
	// wait for it until the time limit, and the kill is the cause.
	case out.OOM:
		ph.Reason = describeOOM(out)
	case out.TimedOut:
		ph.ExitCode = ExitTimeout
		ph.Reason = "timed out"
	case out.ExitCode == -1:
		ph.Reason = "harness killed by " + out.Signal
	case perr != nil:
		ph.Reason = perr.Error()
	case out.ExitCode != ExitOK:
		ph.Reason = DescribeExit(out.ExitCode)
	case res.Check == "":
		ph.Reason = "the harness wrote no verdict"
	case res.Check != "pass":
		ph.Reason = "check " + res.Check
	default:
		ph.Passed = true
	}
	if ph.Passed || ph.Reason == "" {
		return ph
	}
	f, explained := firstFailure(ph.Result)
	if f != "" {
		ph.Reason += ": " + f
	}
	// A failure the results do not explain (a harness that died mid-test,
	// as KernelBot's eval.py does without a GPU) is explained by the
	// harness's own error line, else by the last line it wrote to stderr.
	if !explained && ph.Result != nil && ph.Result.Extra["error"] != "" {
		ph.Reason += " (" + truncate(firstLine(ph.Result.Extra["error"]), 200) + ")"
	} else if tail := lastLine(ph.Stderr); !explained && tail != "" {
		ph.Reason += " (" + tail + ")"
	}
	return ph
}

// firstFailure names the first test or benchmark that failed or never
// finished, and says whether the harness gave a cause for it.
func firstFailure(res *Result) (summary string, explained bool) {
	if res == nil {
		return "", false
	}
	for _, t := range res.Tests {
		if t.Passed() {
			continue
		}
		if t.Status == "" {
			return fmt.Sprintf("test %d (%s) did not finish", t.Index, t.Spec), false
		}
		msg := t.Error
		if msg == "" {
			msg = t.Message
		}
		return fmt.Sprintf("test %d (%s): %s", t.Index, t.Spec, firstLine(msg)), strings.TrimSpace(msg) != ""
	}
	for _, b := range res.Benchmarks {
		if b.Status == "fail" || b.Error != "" {
			return fmt.Sprintf("benchmark %d (%s): %s", b.Index, b.Spec, firstLine(b.Error)), strings.TrimSpace(b.Error) != ""
		}
	}
	return "", false
}

// firstLine summarises a message for a reason: a failed build's errors
// with their lines (load_inline puts the compiler's output in its
// exception), the exception of a Python traceback (its last line), or
// else the first line.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "Error building extension"); i >= 0 {
		if errs := compileErrors(s[i:]); diagnosticRE.MatchString(errs) {
			name, _, _ := strings.Cut(s[i:], ":")
			return name + ": " + errs
		}
	}
	if strings.HasPrefix(s, "Traceback") {
		return lastLine(s)
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return truncate(s, 200)
}

// FormatNS prints a duration given in nanoseconds with three decimals in
// the unit that suits it.
func FormatNS(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.3f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}
