package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

func submitCommand() *cli.Command {
	return &cli.Command{
		Name:      "submit",
		Usage:     "submit a solution and follow it to its result",
		ArgsUsage: "FILE",
		Description: "The leaderboard and GPU come from the flags, else from #!POPCORN leaderboard NAME and\n" +
			"#!POPCORN gpu G lines in the file. Exit status: 0 passed, 1 the submission failed or was\n" +
			"cancelled, 2 bad usage or input, 3 bad token, 4 refused (deadline, closed leaderboard, rate\n" +
			"limit, size), 5 the server failed or could not be reached.",
		Flags: clientFlags(
			&cli.StringFlag{Name: "leaderboard", Aliases: []string{"l"}, Usage: "the leaderboard"},
			&cli.StringFlag{Name: "gpu", Aliases: []string{"g"}, Usage: "the GPU type (cpu for the CPU backend)"},
			&cli.StringFlag{Name: "mode", Aliases: []string{"m"}, Value: "test", Usage: "test, benchmark, leaderboard or profile"},
			&cli.BoolFlag{Name: "no-wait", Usage: "print the submission id and return at once"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "show stdout and stderr of every phase"},
			jsonFlag(),
		),
		Action: runSubmit,
	}
}

func runSubmit(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("submit: give one FILE")
	}
	path := c.Args().First()
	code, err := os.ReadFile(path)
	if err != nil {
		return usageError("submit: %v", err)
	}
	return clientAction(func(c *cli.Context, cl *api.Client) error {
		return follow(c, cl, api.SubmitRequest{Leaderboard: c.String("leaderboard"), GPU: c.String("gpu"),
			Mode: c.String("mode"), FileName: filepath.Base(path), Code: code})
	})(c)
}

// follow submits and, unless --no-wait, follows the submission to its
// result: its place in the queue while it waits, each test as it is
// reported, each phase as it ends, then the result and the rank.
func follow(c *cli.Context, cl *api.Client, req api.SubmitRequest) error {
	sub, err := cl.Submit(c.Context, req)
	if err != nil {
		return err
	}
	w := c.App.Writer
	asJSON := c.Bool("json")
	if c.Bool("no-wait") {
		if asJSON {
			return printJSON(w, map[string]any{"id": sub.ID, "status": sub.Status})
		}
		fmt.Fprintf(w, "submission %d queued: %s on %s, mode %s\n", sub.ID, sub.Leaderboard, sub.GPUType, sub.Mode)
		return nil
	}
	// While the submission waits, show its place in the queue when it moves.
	started, lastPos := false, -1
	position := func() {
		if asJSON || started {
			return
		}
		q, err := cl.Queue(c.Context)
		if err != nil {
			return
		}
		for _, j := range q.Mine {
			if j.Submission == sub.ID && j.State == "queued" && j.Position != lastPos {
				lastPos = j.Position
				fmt.Fprintf(w, "  queue position %d, starts in about %s\n", j.Position, j.ETA.Round(time.Second))
				return
			}
		}
	}
	if !asJSON {
		fmt.Fprintf(w, "submission %d queued: %s on %s, mode %s\n", sub.ID, sub.Leaderboard, sub.GPUType, sub.Mode)
		position()
	}
	pp := newProgressPrinter(w)
	final, err := cl.WaitWith(c.Context, sub.ID, func(ev api.Event) {
		if ev.Kind == api.EventRunStarted {
			started = true
		}
		if !asJSON {
			pp.event(ev)
		}
	}, api.WaitOptions{Poll: 3 * time.Second, Idle: position, Unreachable: sayUnreachable(c.App.ErrWriter)})
	if err != nil {
		return err
	}
	res := api.ResultOf(&final.Submission)
	if res.Passed && res.Score != nil {
		if rk, err := cl.Ranking(c.Context, res.Leaderboard, res.GPU); err == nil && len(rk.Rankings) == 1 {
			for _, row := range rk.Rankings[0].Rows {
				if row.Submission == res.ID {
					res.Rank = row.Rank
				}
			}
		}
	}
	if asJSON {
		if err := printJSON(w, res); err != nil {
			return err
		}
	} else {
		printResult(w, res, c.Bool("verbose"))
	}
	return submissionExit(res)
}

// sayUnreachable tells a follower, on w (stderr: stdout may be --json),
// that the box is out of reach and the wait goes on: once, again when
// the error changes, and when the box answers again. The submission is
// safe in the box meanwhile; following it only waits.
func sayUnreachable(w io.Writer) func(error) {
	return func(err error) {
		if err == nil {
			fmt.Fprintln(w, "the box answers again")
			return
		}
		fmt.Fprintf(w, "the box is unreachable, retrying (%v)\n", err)
	}
}

func submissionExit(res api.SubmitResult) error {
	switch {
	case res.Status == api.StatusFailed:
		return &ExitError{Code: api.ExitServer, Err: fmt.Errorf("submission %d could not be evaluated: %s", res.ID, res.Reason)}
	case !res.Passed:
		return &ExitError{Code: api.ExitFailed}
	}
	return nil
}

// progressPrinter shows events as lines of progress. Tests are printed as
// the harness reports them (run.test); a phase's tests are printed with the
// phase only when none came live (a harness that writes them at the end).
type progressPrinter struct {
	w    io.Writer
	live map[string]bool // run/phase -> tests were streamed
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	return &progressPrinter{w: w, live: map[string]bool{}}
}

func testLine(w io.Writer, index int, spec string, passed bool) {
	mark := "✓"
	if !passed {
		mark = "✗"
	}
	fmt.Fprintf(w, "    %s test %d %s\n", mark, index, spec)
}

// event prints one event of the log. A kind this client does not know
// (a newer daemon's) is skipped: progress is a courtesy, the result is
// read from the submission once it ends.
func (p *progressPrinter) event(ev api.Event) {
	w := p.w
	pl, err := ev.Payload()
	if err != nil {
		return
	}
	switch e := pl.(type) {
	case *api.RunStarted:
		who := ""
		if e.Secret {
			who = "secret-seed "
		}
		fmt.Fprintf(w, "  %srun started on %s\n", who, e.GPUID)
	case *api.RunRetried:
		fmt.Fprintf(w, "  the box failed to run it; retrying (attempt %d)\n", e.Attempt)
	case *api.RunTest:
		p.live[fmt.Sprintf("%d/%s", e.Run, e.Phase)] = true
		testLine(w, e.Index, e.Spec, e.Status == "pass")
	case *api.RunPhase:
		who := ""
		if e.Secret {
			who = "secret "
		}
		verdict := "passed"
		if !e.Passed {
			verdict = "FAILED: " + e.Reason
		}
		fmt.Fprintf(w, "  %s%s phase %s (%s)\n", who, e.Phase, verdict, e.Wall.Round(10*time.Millisecond))
		if !p.live[fmt.Sprintf("%d/%s", e.Run, e.Phase)] {
			for _, t := range e.Tests {
				testLine(w, t.Index, t.Spec, t.Passed())
			}
		}
	}
}

func printResult(w io.Writer, res api.SubmitResult, verbose bool) {
	rep := &problems.Report{Passed: res.Passed, Reason: res.Reason, Tests: res.Tests, Benchmarks: res.Benchmarks, Phases: res.Phases}
	if verbose && len(res.Phases) > 0 {
		writeReport(w, rep, true)
	} else {
		for _, b := range res.Benchmarks {
			switch {
			case b.Report != "": // profile mode: the profiler's table
				fmt.Fprintf(w, "  bench %-2d %s\n%s\n", b.Index, b.Spec, indent(decodeReport(b.Report), "    "))
			case b.Error == "" && b.Mean > 0:
				fmt.Fprintf(w, "  bench %-2d %-40s mean %10s  best %10s  runs %d\n", b.Index, b.Spec, problems.FormatNS(b.Mean), problems.FormatNS(b.Best), b.Runs)
			}
		}
	}
	if p := res.Profile; p != nil {
		writeProfileSummary(w, p, "  ")
		if res.Download {
			fmt.Fprintf(w, "  the full report: kernelbox submissions show %d --profile out.ncu-rep (opens in Nsight Compute)\n", res.ID)
		}
	}
	if res.Secret != nil {
		v := "passed"
		if !res.Secret.Passed {
			v = "failed"
		}
		fmt.Fprintf(w, "  secret-seed run: %s\n", v)
	}
	switch {
	case res.Status == api.StatusFailed:
		fmt.Fprintf(w, "ERROR: the box could not evaluate submission %d: %s\n", res.ID, res.Reason)
	case res.Status == api.StatusCancelled:
		fmt.Fprintf(w, "CANCELLED: submission %d\n", res.ID)
	case res.Passed && res.Score != nil:
		fmt.Fprintf(w, "PASSED: submission %d, score %s", res.ID, problems.FormatNS(*res.Score*1e9))
		if res.Rank > 0 {
			fmt.Fprintf(w, ", rank %d on %s", res.Rank, res.GPU)
		}
		fmt.Fprintln(w)
		if res.Unranked != "" {
			fmt.Fprintf(w, "  %s\n", res.Unranked)
		}
	case res.Passed:
		fmt.Fprintf(w, "PASSED: submission %d\n", res.ID)
	default:
		fmt.Fprintf(w, "FAILED: submission %d: %s\n", res.ID, res.Reason)
	}
}
