package cli

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

func problemsCommand() *cli.Command {
	return &cli.Command{
		Name:  "problems",
		Usage: "work with problem directories and the bundled library",
		Subcommands: []*cli.Command{
			{
				Name:      "check",
				Usage:     "validate problems and run their fixtures (correct must pass, wrong must fail)",
				ArgsUsage: "DIR|COMPETITION.yaml|NAME...",
				Flags: []cli.Flag{
					pythonFlag(),
					&cli.BoolFlag{Name: "no-rank", Usage: "run only the tests, not a leaderboard run of the first correct fixture"},
					&cli.BoolFlag{Name: "templates", Usage: "also run every template, which must pass the tests (the bundled library's do)"},
					&cli.BoolFlag{Name: "json", Usage: "print the results as JSON"},
				},
				Action: runCheck,
			},
			{
				Name:  "list",
				Usage: "list the server's problems, or the bundled ones with --local or without a server",
				Flags: clientFlags(jsonFlag(), &cli.BoolFlag{Name: "local", Usage: "list the problems bundled in this binary"}),
				Action: func(c *cli.Context) error {
					if c.Bool("local") || (c.String("server") == "" && readClientConfig(c).Server == "") {
						for _, name := range problems.LibraryNames() {
							fmt.Fprintln(c.App.Writer, name)
						}
						return nil
					}
					cl, err := client(c)
					if err != nil {
						return err
					}
					lbs, err := cl.Leaderboards(c.Context)
					if err != nil {
						return clientError(err)
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, lbs)
					}
					for _, lb := range lbs {
						fmt.Fprintf(c.App.Writer, "%-16s %-3s %s\n", lb.Name, lb.Lang, firstSentence(lb.Description))
					}
					return nil
				},
			},
			{
				Name:      "show",
				Usage:     "show a problem of the server: description, GPUs, deadline, templates",
				ArgsUsage: "NAME",
				Flags:     clientFlags(jsonFlag()),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usageError("problems show: give one NAME")
					}
					cl, err := client(c)
					if err != nil {
						return err
					}
					lb, err := cl.Leaderboard(c.Context, c.Args().First())
					if err != nil {
						return clientError(err)
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, lb)
					}
					w := c.App.Writer
					fmt.Fprintf(w, "%s (%s, ranked by %s): %s, %s, deadline %s\n", lb.Name, lb.Lang, lb.RankingBy, lb.State, lb.Visibility, deadlineText(lb.Deadline))
					fmt.Fprintf(w, "GPUs: %s (on this box: %s)\n", strings.Join(lb.GPUs, ", "), strings.Join(lb.Available, ", "))
					if lb.TimedBy == problems.TimedByProblem {
						fmt.Fprintln(w, problems.TimedByNote)
					}
					fmt.Fprintf(w, "templates: %s (kernelbox problems template %s KEY)\n\n%s\n", strings.Join(lb.Templates, ", "), lb.Name, strings.TrimSpace(lb.Description))
					return nil
				},
			},
			{
				Name:      "template",
				Usage:     "download a problem's template (the starting point of a solution)",
				ArgsUsage: "NAME KEY",
				Flags:     clientFlags(&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write it to this file instead of stdout"}),
				Action: func(c *cli.Context) error {
					if c.NArg() != 2 {
						return usageError("problems template: give NAME and KEY (problems show NAME lists the keys)")
					}
					cl, err := client(c)
					if err != nil {
						return err
					}
					var buf strings.Builder
					if err := cl.Template(c.Context, c.Args().Get(0), c.Args().Get(1), &buf); err != nil {
						return clientError(err)
					}
					if out := c.String("output"); out != "" {
						if err := os.WriteFile(out, []byte(buf.String()), 0o644); err != nil {
							return usageError("problems template: %v", err)
						}
						return nil
					}
					_, err = io.WriteString(c.App.Writer, buf.String())
					return err
				},
			},
			{
				Name:      "export",
				Usage:     "write the bundled library (problems, harness, competition file) into DIR",
				ArgsUsage: "DIR",
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usageError("problems export: give one DIR")
					}
					if err := problems.ExportLibrary(c.Args().First()); err != nil {
						return &ExitError{Code: api.ExitUsage, Err: err}
					}
					fmt.Fprintf(c.App.Writer, "wrote %d problems to %s\n", len(problems.LibraryNames()), c.Args().First())
					return nil
				},
			},
		},
	}
}

// A checkTarget is a problem to check and the GPU types it runs on (its
// competition's, else its task.yml's).
type checkTarget struct {
	task *problems.Task
	gpus []string
}

// runsOn says whether a problem listing gpus runs on device (cpu, or cuda
// for any GPU type: the box's own name for its GPUs is not the question).
func (ct checkTarget) runsOn(device string) bool {
	if len(ct.gpus) == 0 {
		return true
	}
	for _, g := range ct.gpus {
		if strings.EqualFold(g, "cpu") == (device == "cpu") {
			return true
		}
	}
	return false
}

// loadTargets expands check arguments into problems: a problem directory,
// a competition file (all its problems) or a bundled problem's name. The
// error names every one that did not load; the others are still returned.
func loadTargets(args []string, scratch string) ([]checkTarget, error) {
	var tasks []checkTarget
	var errs []error
	for _, a := range args {
		if st, err := os.Stat(a); err == nil && !st.IsDir() {
			comp, err := problems.LoadCompetition(a)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, p := range comp.Problems {
				gpus := p.GPUs
				if len(gpus) == 0 {
					gpus = p.Task.GPUs
				}
				tasks = append(tasks, checkTarget{p.Task, gpus})
			}
			if err := comp.BadErr(); err != nil {
				errs = append(errs, err) // check names every problem that does not load
			}
			continue
		}
		dir, err := problems.ResolveProblem(a, filepath.Join(scratch, fmt.Sprintf("lib%d", len(tasks))))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t, err := problems.LoadTask(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		tasks = append(tasks, checkTarget{t, t.GPUs})
	}
	return tasks, errors.Join(errs...)
}

func runCheck(c *cli.Context) error {
	if c.NArg() == 0 {
		return usageError("problems check: give at least one problem directory, competition file or bundled problem name")
	}
	scratch, err := os.MkdirTemp("", "kernelbox-check-")
	if err != nil {
		return usageError("problems check: %v", err)
	}
	defer os.RemoveAll(scratch)
	// A problem that does not load, or cannot be checked, is named and
	// the others are still checked; it makes the exit code 2 at the end.
	targets, unloaded := loadTargets(c.Args().Slice(), scratch)
	w := c.App.Writer
	if len(targets) == 0 && unloaded != nil {
		return &ExitError{Code: api.ExitUsage, Err: unloaded}
	}
	if unloaded != nil {
		fmt.Fprintf(c.App.ErrWriter, "kernelbox: not checked, they do not load:\n%v\n", unloaded)
	}
	it, err := findPython(c)
	if err != nil {
		return err
	}
	failed, unchecked := false, 0
	all := map[string][]problems.FixtureResult{}
	for _, ct := range targets {
		t := ct.task
		if !c.Bool("json") {
			fmt.Fprintf(w, "%s: task.yml valid (%d tests, %d benchmarks, ranking_by %s)\n", t.Name, len(t.Tests), len(t.Benchmarks), t.RankingBy)
			for _, warn := range t.Warnings {
				fmt.Fprintf(w, "  warning: %s\n", warn)
			}
			if note := t.HarnessNote(); note != "" {
				fmt.Fprintf(w, "  note: %s\n", note)
			}
		}
		if !ct.runsOn(it.Device) {
			if !c.Bool("json") {
				fmt.Fprintf(w, "  skipped: does not run on %s (gpus: %s)\n", it.Device, strings.Join(ct.gpus, ", "))
			}
			continue
		}
		results, err := problems.CheckProblem(c.Context, problems.ExecLauncher{}, t, problems.CheckOptions{
			Python: it, Env: os.Environ(), Scratch: scratch, RankCorrect: !c.Bool("no-rank"), Templates: c.Bool("templates"),
		})
		if err != nil {
			unchecked++
			fmt.Fprintf(c.App.ErrWriter, "kernelbox: %v\n", err)
			if !c.Bool("json") {
				fmt.Fprintf(w, "  not checked: %v\n", err)
			}
			continue
		}
		all[t.Name] = results
		for _, r := range results {
			if !r.OK {
				failed = true
			}
			if c.Bool("json") {
				continue
			}
			label := problems.FixtureLabel(r.Path)
			switch {
			case r.Skipped != "":
				fmt.Fprintf(w, "  - %-40s %-11s skipped: %s\n", label, r.Mode, r.Skipped)
			case r.OK:
				extra := ""
				if r.Report.Score != nil {
					extra = "score " + problems.FormatNS(*r.Report.Score*1e9)
				} else if !r.Report.Passed {
					extra = "failed as it should: " + firstLineOf(r.Report.Reason)
				}
				fmt.Fprintf(w, "  ✓ %-40s %-11s %s\n", label, r.Mode, extra)
			default:
				fmt.Fprintf(w, "  ✗ %-40s %-11s %s\n", label, r.Mode, r.Problems)
			}
		}
	}
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(all); err != nil {
			return usageError("problems check: %v", err)
		}
	}
	switch {
	case unloaded != nil || unchecked > 0:
		return &ExitError{Code: api.ExitUsage, Err: errors.New("problems check: some problems could not be checked (named above)")}
	case failed:
		return &ExitError{Code: api.ExitFailed, Err: errors.New("problems check: some fixtures did not behave as they should")}
	}
	return nil
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}

func decodeReport(b64 string) string {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return b64
	}
	return string(data)
}

// firstSentence shortens a description to its first line.
func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 70 {
		s = s[:67] + "..."
	}
	return s
}
