package problems

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// runTogether runs every phase of a run in one harness process (the
// kernelbox contract): torch, the device context and the submission's
// compile caches start once, not once a phase. The harness opens each
// phase's results with a "phase: MODE" line and stops at the first phase
// that fails; each phase is judged as if it had run alone.
func runTogether(ctx context.Context, l Launcher, t *Task, opts EvalOptions, rep *Report, steps []phase, entry, env []string) (done bool, err error) {
	argv := append([]string(nil), entry...)
	var timeout time.Duration
	for _, s := range steps {
		name := s.name + ".cases.txt"
		if err := os.WriteFile(filepath.Join(opts.WorkDir, name), []byte(FormatCases(s.cases)), 0o644); err != nil {
			return true, fmt.Errorf("evaluate %s: write cases: %w", t.Name, err)
		}
		argv = append(argv, s.name, name)
		timeout += s.timeout
	}
	launch := Launch{Dir: opts.WorkDir, Argv: argv, Env: env, Timeout: timeout, OutputLimit: opts.OutputLimit, Loopback: t.MultiGPU,
		Cache: opts.Cache}
	if steps[0].name == "test" {
		launch.Progress = testsAsTheyCome(opts)
	}
	if err := opts.gate.attach(ctx, &launch, warmStarts(t)); err != nil {
		return true, fmt.Errorf("evaluate %s: %s phases: %w", t.Name, steps[0].name, err)
	}
	out, err := l.Launch(ctx, launch)
	if err != nil {
		return true, fmt.Errorf("evaluate %s: %s phases: %w", t.Name, steps[0].name, err)
	}
	segs := splitPhases(out.Result, steps)
	last := max(len(segs)-1, 0)
	var spent time.Duration
	for k, s := range steps {
		o := out
		o.Result = nil
		if k < len(segs) {
			o.Result = segs[k].result
		}
		if k < last {
			// A phase the harness went on from ended well; the process's
			// exit, output and end belong to the last one it began.
			o = Outcome{Result: o.Result, Wall: segs[k].wall}
			spent += segs[k].wall
		} else {
			o.Wall = max(out.Wall-spent, 0)
		}
		if record(opts, rep, s, judgePhase(s.name, o, len(s.cases))) {
			return true, nil
		}
	}
	return false, nil
}

// segment is one phase's part of a result stream.
type segment struct {
	result []byte
	wall   time.Duration
}

// splitPhases cuts a result stream at its "phase: MODE" lines, which must
// name the steps in order; lines before the first belong to the first
// phase (a harness that failed before it began). A phase line out of
// order ends the split: what follows it is not believed.
func splitPhases(result []byte, steps []phase) []segment {
	var segs []segment
	cur := &segment{}
	began := false
	for line := range bytes.Lines(result) {
		key, value, ok := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(":"))
		key, value = bytes.TrimSpace(key), bytes.TrimSpace(value)
		switch {
		case ok && string(key) == "phase":
			if began {
				segs = append(segs, *cur)
				cur = &segment{}
			}
			if len(segs) >= len(steps) || string(value) != steps[len(segs)].name {
				return segs
			}
			began = true
		case ok && string(key) == "phase-wall":
			if ns, err := strconv.ParseInt(string(value), 10, 64); err == nil && ns >= 0 {
				cur.wall = time.Duration(ns)
			}
		default:
			cur.result = append(cur.result, line...)
		}
	}
	return append(segs, *cur)
}
