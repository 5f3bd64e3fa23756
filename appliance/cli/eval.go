package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "evaluate a submission locally, without sandbox or daemon",
		ArgsUsage: "SUBMISSION",
		Description: "Runs the problem's harness on this machine: the contestant's and the problem author's\n" +
			"local loop. Exit status: 0 passed, 1 the submission failed, 2 usage or problem errors.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "problem", Aliases: []string{"p"}, Required: true, Usage: "problem directory, or the name of a bundled problem"},
			&cli.StringFlag{Name: "mode", Aliases: []string{"m"}, Value: "test", Usage: "test, benchmark, leaderboard or profile"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON document instead of a table"},
			&cli.StringFlag{Name: "seed", Usage: "a secret seed, as a private run would get (POPCORN_SEED)"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the work directory and print where it is"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "show the harness's stdout and stderr"},
			&cli.BoolFlag{Name: "sandbox", Usage: "run every phase in the sandbox, as the daemon will (needs root)"},
			&cli.StringSliceFlag{Name: "bind", Usage: "with --sandbox: an extra read-only bind SRC[:DST] (repeatable)"},
			&cli.StringFlag{Name: "ncu", Usage: "profile mode: the Nsight Compute to run (found by itself on a CUDA device; off for PyTorch's table)"},
			&cli.StringFlag{Name: "profile", Usage: "profile mode: save ncu's report to `FILE` (.ncu-rep)"},
			deviceFlag(),
			pythonFlag(),
		},
		Action: runEval,
	}
}

// evalJSON is the document --json prints.
type evalJSON struct {
	*problems.Report
	Submission string                `json:"submission"`
	Python     *problems.Interpreter `json:"python"`
	// Ceilings are the peak rates the physics floor was held to, if any.
	Ceilings *problems.Ceilings `json:"ceilings,omitempty"`
	WorkDir  string             `json:"work_dir,omitempty"`
}

func runEval(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("eval: give exactly one SUBMISSION file (got %d arguments)", c.NArg())
	}
	mode, err := problems.ParseMode(c.String("mode"))
	if err != nil {
		return usageError("eval: %v", err)
	}
	var seed *int64
	if s := c.String("seed"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return usageError("eval: --seed must be a non-negative integer, got %q", s)
		}
		seed = &n
	}
	subPath := c.Args().First()
	sub, err := readSubmission(subPath)
	if err != nil {
		return &ExitError{Code: api.ExitUsage, Err: err}
	}

	scratch, err := os.MkdirTemp("", "kernelbox-eval-")
	if err != nil {
		return usageError("eval: %v", err)
	}
	keep := c.Bool("keep")
	if !keep {
		defer os.RemoveAll(scratch)
	}
	dir, err := problems.ResolveProblem(c.String("problem"), scratch)
	if err != nil {
		return &ExitError{Code: api.ExitUsage, Err: err}
	}
	task, err := problems.LoadTask(dir)
	if err != nil {
		return &ExitError{Code: api.ExitUsage, Err: err}
	}
	if want := task.SubmissionFile(); problems.IsArchive(subPath) {
		files, err := problems.UnpackArchive(sub, filepath.Base(subPath))
		if err == nil {
			err = task.CheckArchive(files)
		}
		if err != nil {
			return usageError("eval: %s: %v", subPath, err)
		}
	} else if filepath.Ext(want) != filepath.Ext(subPath) {
		return usageError("eval: %s takes a %s file (it becomes %s), got %s", task.Name, filepath.Ext(want), want, subPath)
	}
	var it *problems.Interpreter
	if task.Lang == problems.LangCUDA {
		// A native harness needs nvcc and a GPU, not Python.
		if _, err := exec.LookPath("nvcc"); err != nil {
			return usageError("eval: %s is a lang cu problem and needs nvcc on PATH (the CUDA toolkit)", task.Name)
		}
		it = &problems.Interpreter{Device: "cuda"}
	} else if it, err = findPython(c); err != nil {
		return err
	}
	if !task.RunsOn(it.Device) && it.Device == "cpu" {
		return usageError("eval: %s does not run on the CPU backend (its gpus: %s)", task.Name, strings.Join(task.GPUs, ", "))
	}
	work := filepath.Join(scratch, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return usageError("eval: %v", err)
	}
	launcher, env, profiler, cleanup, err := evalLauncher(c, it, mode)
	if err != nil {
		return err
	}
	defer cleanup()
	// Found before the harness starts, whose runs would slow the CPU
	// backend's measurement; only timed modes of a problem with a floor
	// use them.
	var ceilings *problems.Ceilings
	var ceilingsFrom string
	if task.Floor != nil && (mode == problems.ModeBenchmark || mode == problems.ModeLeaderboard) {
		ceilings, ceilingsFrom = evalCeilings(c, it.Device)
	}
	rep, err := problems.Evaluate(c.Context, launcher, task, problems.EvalOptions{
		Mode: mode, Python: it.Path, Device: it.Device, Seed: seed, Env: env, WorkDir: work, Submission: sub, SubmissionName: filepath.Base(subPath), Profiler: profiler,
		Ceilings: ceilings,
	})
	if err != nil {
		return &ExitError{Code: api.ExitUsage, Err: err}
	}
	if out := c.String("profile"); out != "" {
		if rep.Profile == nil || rep.Profile.File == "" {
			fmt.Fprintf(c.App.ErrWriter, "kernelbox eval: no ncu report to save to %s\n", out)
		} else if err := problems.CopyFileAtomic(rep.Profile.File, out); err != nil {
			return usageError("eval --profile: %v", err)
		}
	}
	w := c.App.Writer
	if c.Bool("json") {
		doc := evalJSON{Report: rep, Submission: subPath, Python: it, Ceilings: ceilings}
		if keep {
			doc.WorkDir = work
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return usageError("eval: %v", err)
		}
	} else {
		runtime := "native (nvcc)"
		if it.Path != "" {
			runtime = fmt.Sprintf("python %s (torch %s)", it.Path, it.Torch)
		}
		fmt.Fprintf(w, "problem %s · mode %s · device %s · %s\n", task.Name, mode, it.Device, runtime)
		if ceilingsFrom != "" {
			fmt.Fprintf(w, "physics floor ceilings: %s\n", ceilingsFrom)
		}
		writeReport(w, rep, c.Bool("verbose"))
		if p := rep.Profile; p != nil {
			writeProfileSummary(w, p, "")
		}
		if keep {
			fmt.Fprintf(w, "work directory: %s\n", work)
		}
	}
	if !rep.Passed {
		return &ExitError{Code: api.ExitFailed}
	}
	return nil
}

func readSubmission(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("submission: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("submission %s: not a regular file", path)
	}
	if st.Size() > problems.MaxSubmissionBytes {
		return nil, fmt.Errorf("submission %s: %d bytes, more than the %d allowed", path, st.Size(), problems.MaxSubmissionBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("submission: %w", err)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("submission %s: the file is empty", path)
	}
	if !utf8.Valid(data) && !problems.IsArchive(path) {
		return nil, errors.New("submission " + path + ": not UTF-8 text")
	}
	return data, nil
}

// writeReport prints the human-readable table of an evaluation.
func writeReport(w io.Writer, rep *problems.Report, verbose bool) {
	for _, ph := range rep.Phases {
		verdict := "pass"
		if !ph.Passed {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "\n%s: %s  (%s)\n", ph.Name, verdict, ph.Wall.Round(10*time.Millisecond))
		if ph.Result != nil {
			for _, t := range ph.Result.Tests {
				mark := "✓"
				if !t.Passed() {
					mark = "✗"
				}
				fmt.Fprintf(w, "  %s test %-2d %s\n", mark, t.Index, t.Spec)
				for _, line := range detailLines(t.Error, t.Message, t.Passed(), verbose) {
					fmt.Fprintf(w, "        %s\n", line)
				}
			}
			for _, b := range ph.Result.Benchmarks {
				switch {
				case b.Error != "" || b.Status == "fail":
					fmt.Fprintf(w, "  ✗ bench %-2d %s\n", b.Index, b.Spec)
					for _, line := range detailLines(b.Error, "", false, verbose) {
						fmt.Fprintf(w, "        %s\n", line)
					}
				case b.Report != "":
					fmt.Fprintf(w, "  bench %-2d %s\n%s\n", b.Index, b.Spec, indent(decodeReport(b.Report), "    "))
				default:
					rel := 0.0
					if b.Mean > 0 {
						rel = 100 * b.Err / b.Mean
					}
					fmt.Fprintf(w, "  bench %-2d %-40s mean %10s ± %.2f%%  best %10s  worst %10s  runs %d\n",
						b.Index, b.Spec, problems.FormatNS(b.Mean), rel, problems.FormatNS(b.Best), problems.FormatNS(b.Worst), b.Runs)
				}
			}
		}
		if !ph.Passed {
			fmt.Fprintf(w, "  reason: %s\n", ph.Reason)
		}
		if verbose || (!ph.Passed && ph.Result == nil) {
			if s := strings.TrimSpace(ph.Stdout); s != "" {
				fmt.Fprintf(w, "  stdout:\n%s\n", indent(tail(s, 40), "    "))
			}
			if s := strings.TrimSpace(ph.Stderr); s != "" {
				fmt.Fprintf(w, "  stderr:\n%s\n", indent(tail(s, 40), "    "))
			}
		}
	}
	fmt.Fprintln(w)
	if rep.Score != nil {
		fmt.Fprintf(w, "score: %s (%s of %d benchmark means)\n", problems.FormatNS(*rep.Score*1e9), rep.RankingBy, len(rep.Benchmarks))
	}
	if rep.TimedBy == problems.TimedByProblem {
		fmt.Fprintln(w, problems.TimedByNote)
	}
	if len(rep.Flags) > 0 {
		// As the daemon records them: the run stands, but on the box an
		// organiser reviews it before it ranks.
		fmt.Fprintln(w, "flagged for review:")
		for _, f := range rep.Flags {
			fmt.Fprintf(w, "  %s: %s\n", f.Rule, f.Message)
		}
	}
	if rep.Passed {
		fmt.Fprintln(w, "PASSED")
	} else {
		fmt.Fprintf(w, "FAILED: %s\n", rep.Reason)
	}
}

func detailLines(errText, msg string, passed, verbose bool) []string {
	text := errText
	if text == "" {
		text = msg
	}
	text = strings.TrimSpace(text)
	if text == "" || (passed && !verbose) {
		return nil
	}
	lines := strings.Split(text, "\n")
	if !verbose && len(lines) > 12 {
		lines = append([]string{"..."}, lines[len(lines)-12:]...)
	}
	return lines
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// writeProfileSummary prints ncu's summary of a profile run, its lines
// under a heading at prefix.
func writeProfileSummary(w io.Writer, p *problems.ProfileResult, prefix string) {
	fmt.Fprintf(w, "%sNsight Compute, %d kernels in the %s range:\n%s\n", prefix, p.Kernels, problems.NVTXRange, indent(p.Summary, prefix+"  "))
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

// deviceFlag() passes host device nodes in by hand; the GPU lease will do it
// for the daemon.
func deviceFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "device", Usage: "a host device node to pass in, such as /dev/nvidia0 (repeatable)"}
}
