package appliance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"kernelbox/appliance/api"

	"github.com/urfave/cli/v2"

	"kernelbox/problems"
)

// clientConfig is what `kernelbox login` stores.
type clientConfig struct {
	Server string `json:"server"`
	Token  string `json:"token"`
}

// clientConfigPath is ~/.config/kernelbox/config.json unless
// --client-config (KERNELBOX_CLIENT_CONFIG) says otherwise.
func clientConfigPath(c *cli.Context) (string, error) {
	if p := c.String("client-config"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory: %w", err)
	}
	return filepath.Join(dir, "kernelbox", "config.json"), nil
}

func readClientConfig(c *cli.Context) clientConfig {
	var cc clientConfig
	p, err := clientConfigPath(c)
	if err != nil {
		return cc
	}
	if data, err := os.ReadFile(p); err == nil {
		_ = json.Unmarshal(data, &cc)
	}
	return cc
}

func writeClientConfig(c *cli.Context, cc clientConfig) (string, error) {
	p, err := clientConfigPath(c)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	data, _ := json.MarshalIndent(cc, "", "  ")
	// 0600: the file holds a token.
	return p, os.WriteFile(p, append(data, '\n'), 0o600)
}

// clientFlags go on every command that talks to the daemon.
func clientFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "server", Usage: "the kernelbox server: http://HOST:PORT or unix:/path/to/kernelbox.sock", EnvVars: []string{"KERNELBOX_SERVER"}},
		&cli.StringFlag{Name: "token", Usage: "your API token", EnvVars: []string{"KERNELBOX_TOKEN"}},
		&cli.StringFlag{Name: "client-config", Usage: "the login file (default ~/.config/kernelbox/config.json)", EnvVars: []string{"KERNELBOX_CLIENT_CONFIG"}},
	}, extra...)
}

// jsonFlag() and the other shared flags are made fresh for each command:
// urfave/cli writes into a flag when it parses it, so one flag value must
// not serve two apps (the tests run many at once).
func jsonFlag() cli.Flag { return &cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"} }

// client builds the API client from flags, environment and the login file.
func client(c *cli.Context) (*api.Client, error) {
	cc := readClientConfig(c)
	server, token := c.String("server"), c.String("token")
	if server == "" {
		server = cc.Server
	}
	if token == "" && (c.String("server") == "" || c.String("server") == cc.Server) {
		token = cc.Token
	}
	cl, err := api.NewClient(server, token)
	if err != nil {
		return nil, clientError(err)
	}
	return cl, nil
}

// clientError turns an API error into the exit status its code calls for.
func clientError(err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: api.ExitStatus(api.ErrorCode(err)), Err: err}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func clientCommands() []*cli.Command {
	return []*cli.Command{
		serveCommand(),
		{
			Name:  "login",
			Usage: "store the server and your token in ~/.config/kernelbox",
			Flags: clientFlags(),
			Action: func(c *cli.Context) error {
				if c.String("server") == "" || c.String("token") == "" {
					return usageError("login: give --server URL and --token T")
				}
				cl, err := api.NewClient(c.String("server"), c.String("token"))
				if err != nil {
					return clientError(err)
				}
				u, err := cl.Me(c.Context)
				if err != nil {
					return clientError(err)
				}
				p, err := writeClientConfig(c, clientConfig{Server: c.String("server"), Token: c.String("token")})
				if err != nil {
					return &ExitError{Code: api.ExitUsage, Err: err}
				}
				fmt.Fprintf(c.App.Writer, "logged in to %s as %s (%s); saved in %s\n", c.String("server"), u.Name, u.Role, p)
				return nil
			},
		},
		{
			Name:  "register",
			Usage: "create your account with an invite code and log in",
			Flags: clientFlags(
				&cli.StringFlag{Name: "invite", Required: true, Usage: "the invite code an organiser gave you"},
				&cli.StringFlag{Name: "name", Required: true, Usage: "your user name (letters, digits, - _ .)"},
			),
			Action: clientAction(func(c *cli.Context, cl *api.Client) error {
				cr, err := cl.Register(c.Context, c.String("invite"), c.String("name"))
				if err != nil {
					return clientError(err)
				}
				server := c.String("server")
				if server == "" {
					server = readClientConfig(c).Server
				}
				p, err := writeClientConfig(c, clientConfig{Server: server, Token: cr.Token})
				if err != nil {
					return &ExitError{Code: api.ExitUsage, Err: err}
				}
				fmt.Fprintf(c.App.Writer, "registered %s (%s); token saved in %s\n", cr.User.Name, cr.User.Role, p)
				return nil
			}),
		},
		{
			Name:      "join",
			Usage:     "join closed leaderboards with an invite code",
			ArgsUsage: "CODE",
			Flags:     clientFlags(),
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return usageError("join: give one invite CODE")
				}
				cl, err := client(c)
				if err != nil {
					return err
				}
				names, err := cl.Join(c.Context, c.Args().First())
				if err != nil {
					return clientError(err)
				}
				fmt.Fprintf(c.App.Writer, "joined: %s\n", strings.Join(names, ", "))
				return nil
			},
		},
		submitCommand(),
		submissionsCommand(),
		{
			Name:  "leaderboards",
			Usage: "list the leaderboards with their GPU types, deadline and state",
			Flags: clientFlags(jsonFlag()),
			Action: clientAction(func(c *cli.Context, cl *api.Client) error {
				lbs, err := cl.Leaderboards(c.Context)
				if err != nil {
					return clientError(err)
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, lbs)
				}
				tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tSTATE\tVISIBILITY\tDEADLINE\tGPUS\tHERE")
				for _, lb := range lbs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", lb.Name, lb.State, lb.Visibility, deadlineText(lb.Deadline),
						strings.Join(lb.GPUs, ","), strings.Join(lb.Available, ","))
				}
				return tw.Flush()
			}),
		},
		{
			Name:      "leaderboard",
			Usage:     "show a leaderboard's ranking",
			ArgsUsage: "NAME",
			Flags:     clientFlags(jsonFlag(), &cli.StringFlag{Name: "gpu", Usage: "one GPU type (default: every one)"}),
			Action:    runLeaderboard,
		},
		{
			Name:  "queue",
			Usage: "show the queue: depth per GPU type, your jobs, their position and ETA",
			Flags: clientFlags(jsonFlag()),
			Action: clientAction(func(c *cli.Context, cl *api.Client) error {
				q, err := cl.Queue(c.Context)
				if err != nil {
					return clientError(err)
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, q)
				}
				tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "GPU\tSLOTS\tRUNNING\tQUEUED\tMEAN RUN")
				for _, g := range q.GPUs {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", g.GPUType, g.Slots, g.Running, g.Queued, g.MeanRun.Round(time.Millisecond))
				}
				for _, j := range q.Mine {
					fmt.Fprintf(tw, "\nyours: submission %d run %d on %s: %s", j.Submission, j.Run, j.GPUType, j.State)
					if j.State == "queued" {
						fmt.Fprintf(tw, ", position %d, starts in about %s", j.Position, j.ETA.Round(time.Second))
					}
				}
				if len(q.Mine) > 0 {
					fmt.Fprintln(tw)
				}
				return tw.Flush()
			}),
		},
		{
			Name:  "gpus",
			Usage: "list the box's GPUs (and CPU-backend slots) and what each is doing",
			Flags: clientFlags(jsonFlag()),
			Action: clientAction(func(c *cli.Context, cl *api.Client) error {
				st, err := cl.GPUs(c.Context)
				if err != nil {
					return clientError(err)
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, st)
				}
				w := c.App.Writer
				if st.Vendor == "none" {
					fmt.Fprintf(w, "no GPUs: %s\n", strings.Join(st.Notes, "; "))
				} else {
					fmt.Fprintf(w, "%s driver %s\n", st.Vendor, st.Driver)
				}
				if st.Profiler != "" {
					fmt.Fprintln(w, st.Profiler)
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SLOT\tTYPE\tNAME\tPCI\tNUMA\tNVLINK\tCPUS\tCLOCKS\tNOW\tSTATE\tJOB")
				for _, s := range st.Slots {
					name, pci, numa, links := "CPU backend", "-", "-", "-"
					if s.GPU != nil {
						name, pci, numa = s.GPU.Name, s.GPU.PCI, strconv.Itoa(s.GPU.NUMANode)
						if n := len(s.GPU.Links); n > 0 {
							total := 0
							for _, l := range s.GPU.Links {
								total += l
							}
							links = fmt.Sprintf("%d to %d GPUs", total, n)
						}
					}
					job := "-"
					if s.Job != 0 {
						job = strconv.FormatInt(s.Job, 10)
					}
					state := s.State
					if s.Drained != "" {
						state += " (" + s.Drained + ")"
					}
					clocks, now := "-", "-"
					if s.Clocks != "" {
						clocks, _, _ = strings.Cut(s.Clocks, " (")
					}
					if t := s.Now; t != nil {
						now = fmt.Sprintf("%d°C %d MHz %d W %d procs", t.TempC, t.SMClockMHz, t.PowerMW/1000, t.Processes)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.GPUType, name, pci, numa, links, s.Cpuset, clocks, now, state, job)
				}
				return tw.Flush()
			}),
		},
		adminCommand(),
	}
}

func deadlineText(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format("2006-01-02 15:04Z")
}

func runLeaderboard(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("leaderboard: give one leaderboard NAME")
	}
	cl, err := client(c)
	if err != nil {
		return err
	}
	rk, err := cl.Ranking(c.Context, c.Args().First(), c.String("gpu"))
	if err != nil {
		return clientError(err)
	}
	if c.Bool("json") {
		if c.String("gpu") != "" && len(rk.Rankings) == 1 {
			return printJSON(c.App.Writer, rk.Rankings[0].Rows)
		}
		return printJSON(c.App.Writer, rk)
	}
	w := c.App.Writer
	for _, r := range rk.Rankings {
		fmt.Fprintf(w, "%s on %s (ranked by %s of the benchmark means)\n", rk.Leaderboard, r.GPU, rk.RankingBy)
		if len(r.Rows) == 0 {
			fmt.Fprintln(w, "  no ranked submissions yet")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  RANK\tUSER\tSCORE\tSUBMISSION\tWHEN")
		for _, row := range r.Rows {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\n", row.Rank, row.User, problems.FormatNS(row.Score*1e9), row.Submission, row.At.Format("2006-01-02 15:04"))
		}
		tw.Flush()
	}
	return nil
}

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

// SubmitResult is the document `submit --json` prints once a submission
// has ended (and `submissions show --json` inside its result).
type SubmitResult struct {
	ID          int64                      `json:"id"`
	Leaderboard string                     `json:"leaderboard"`
	GPU         string                     `json:"gpu"`
	Mode        string                     `json:"mode"`
	Status      string                     `json:"status"`
	Passed      bool                       `json:"passed"`
	Reason      string                     `json:"reason,omitempty"`
	Score       *float64                   `json:"score"`
	Rank        int                        `json:"rank,omitempty"`
	Tests       []problems.TestResult      `json:"tests"`
	Benchmarks  []problems.BenchmarkResult `json:"benchmarks"`
	Secret      *api.Run                   `json:"secret,omitempty"`
	// Profile is profile mode's Nsight Compute summary; Download says
	// whether its report can be fetched (--profile FILE).
	Profile  *problems.ProfileResult `json:"profile,omitempty"`
	Download bool                    `json:"profile_download,omitempty"`
	Phases   []problems.Phase        `json:"-"`
}

// resultOf gathers the public run's tests and benchmarks.
func resultOf(sub *api.Submission) SubmitResult {
	res := SubmitResult{ID: sub.ID, Leaderboard: sub.Leaderboard, GPU: sub.GPUType, Mode: sub.Mode, Status: sub.Status,
		Passed: sub.Passed, Reason: sub.Reason, Score: sub.Score, Tests: []problems.TestResult{}, Benchmarks: []problems.BenchmarkResult{}}
	for i := range sub.Runs {
		r := &sub.Runs[i]
		if r.Secret {
			res.Secret = r
			continue
		}
		var rep problems.Report
		if len(r.Report) > 0 && json.Unmarshal(r.Report, &rep) == nil {
			res.Tests, res.Benchmarks, res.Phases, res.Profile = rep.Tests, rep.Benchmarks, rep.Phases, rep.Profile
		}
		res.Download = res.Download || r.Profile != ""
		if res.Reason == "" {
			res.Reason = r.Reason
		}
	}
	return res
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
	cl, err := client(c)
	if err != nil {
		return err
	}
	sub, err := cl.Submit(c.Context, api.SubmitRequest{Leaderboard: c.String("leaderboard"), GPU: c.String("gpu"),
		Mode: c.String("mode"), FileName: filepath.Base(path), Code: code})
	if err != nil {
		return clientError(err)
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
	final, err := cl.WaitIdle(c.Context, sub.ID, func(ev api.Event) {
		if ev.Kind == api.EventRunStarted {
			started = true
		}
		if !asJSON {
			pp.event(ev)
		}
	}, 3*time.Second, position)
	if err != nil {
		return clientError(err)
	}
	res := resultOf(&final.Submission)
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

func submissionExit(res SubmitResult) error {
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

func printResult(w io.Writer, res SubmitResult, verbose bool) {
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
	case res.Passed:
		fmt.Fprintf(w, "PASSED: submission %d\n", res.ID)
	default:
		fmt.Fprintf(w, "FAILED: submission %d: %s\n", res.ID, res.Reason)
	}
}

// idArg is a command's one argument, a submission id.
func idArg(c *cli.Context) (int64, error) {
	if c.NArg() != 1 {
		return 0, usageError("%s: give one submission ID", c.Command.FullName())
	}
	id, err := strconv.ParseInt(c.Args().First(), 10, 64)
	if err != nil || id <= 0 {
		return 0, usageError("%s: %q is not a submission id", c.Command.FullName(), c.Args().First())
	}
	return id, nil
}

// slotArg is a command's one argument, a GPU slot id.
func slotArg(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", usageError("%s: give one slot ID (kernelbox gpus lists them)", c.Command.FullName())
	}
	return c.Args().First(), nil
}

func submissionsCommand() *cli.Command {
	return &cli.Command{
		Name:  "submissions",
		Usage: "list, show and cancel your submissions",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list your submissions, newest first",
				Flags: clientFlags(jsonFlag(),
					&cli.StringFlag{Name: "leaderboard", Aliases: []string{"l"}, Usage: "only this leaderboard"},
					&cli.BoolFlag{Name: "all", Usage: "every user's (organisers and admins)"},
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "at most this many"}),
				Action: clientAction(func(c *cli.Context, cl *api.Client) error {
					subs, err := cl.Submissions(c.Context, c.String("leaderboard"), c.Bool("all"), c.Int("limit"))
					if err != nil {
						return clientError(err)
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, subs)
					}
					tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tUSER\tLEADERBOARD\tGPU\tMODE\tSTATUS\tPASSED\tSCORE\tWHEN")
					for _, s := range subs {
						score := "-"
						if s.Score != nil {
							score = problems.FormatNS(*s.Score * 1e9)
						}
						fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", s.ID, s.User, s.Leaderboard, s.GPUType, s.Mode, s.Status,
							s.Passed, score, s.Created.Format("2006-01-02 15:04:05"))
					}
					return tw.Flush()
				}),
			},
			{
				Name:      "show",
				Usage:     "show a submission and its result",
				ArgsUsage: "ID",
				Flags: clientFlags(jsonFlag(),
					&cli.BoolFlag{Name: "code", Usage: "print the submitted code too"},
					&cli.BoolFlag{Name: "wait", Usage: "wait for it to end first"},
					&cli.StringFlag{Name: "profile", Usage: "save profile mode's Nsight Compute report to `FILE` (.ncu-rep)"},
					&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "show stdout and stderr of every phase"}),
				Action: func(c *cli.Context) error {
					id, err := idArg(c)
					if err != nil {
						return err
					}
					cl, err := client(c)
					if err != nil {
						return err
					}
					if c.Bool("wait") {
						if _, err := cl.Wait(c.Context, id, nil); err != nil {
							return clientError(err)
						}
					}
					if out := c.String("profile"); out != "" {
						if err := saveProfile(c.Context, cl, id, out); err != nil {
							return err
						}
						fmt.Fprintf(c.App.ErrWriter, "saved the Nsight Compute report of submission %d to %s\n", id, out)
					}
					v, err := cl.Submission(c.Context, id, c.Bool("code"))
					if err != nil {
						return clientError(err)
					}
					if c.Bool("json") {
						doc := struct {
							*api.SubmissionView
							Result *SubmitResult `json:"result,omitempty"`
						}{SubmissionView: v}
						if v.Status != api.StatusQueued && v.Status != api.StatusRunning {
							r := resultOf(&v.Submission)
							doc.Result = &r
						}
						return printJSON(c.App.Writer, doc)
					}
					w := c.App.Writer
					fmt.Fprintf(w, "submission %d by %s: %s on %s, mode %s, %s, submitted %s\n", v.ID, v.User, v.Leaderboard, v.GPUType,
						v.Mode, v.Status, v.Created.Format(time.RFC3339))
					if v.Status != api.StatusQueued && v.Status != api.StatusRunning {
						printResult(w, resultOf(&v.Submission), c.Bool("verbose"))
					}
					if v.Code != "" {
						fmt.Fprintf(w, "\n%s\n", strings.TrimRight(v.Code, "\n"))
					}
					return nil
				},
			},
			{
				Name:      "cancel",
				Usage:     "cancel a queued or running submission",
				ArgsUsage: "ID",
				Flags:     clientFlags(jsonFlag()),
				Action: func(c *cli.Context) error {
					id, err := idArg(c)
					if err != nil {
						return err
					}
					cl, err := client(c)
					if err != nil {
						return err
					}
					sub, err := cl.Cancel(c.Context, id)
					if err != nil {
						return clientError(err)
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, sub)
					}
					fmt.Fprintf(c.App.Writer, "submission %d: %s\n", sub.ID, sub.Status)
					return nil
				},
			},
		},
	}
}

func adminCommand() *cli.Command {
	return &cli.Command{
		Name:  "admin",
		Usage: "organiser and admin commands",
		Subcommands: []*cli.Command{
			{
				Name:  "users",
				Usage: "add, list, ban users and issue tokens",
				Subcommands: []*cli.Command{
					{
						Name: "add", Usage: "add a user and print their token", ArgsUsage: "NAME",
						Flags: clientFlags(jsonFlag(), &cli.StringFlag{Name: "role", Value: "contestant", Usage: "contestant, organiser or admin"}),
						Action: func(c *cli.Context) error {
							if c.NArg() != 1 {
								return usageError("admin users add: give one NAME")
							}
							cl, err := client(c)
							if err != nil {
								return err
							}
							cr, err := cl.AddUser(c.Context, c.Args().First(), api.Role(c.String("role")))
							if err != nil {
								return clientError(err)
							}
							if c.Bool("json") {
								return printJSON(c.App.Writer, cr)
							}
							fmt.Fprintln(c.App.Writer, cr.Token)
							return nil
						},
					},
					{
						Name: "list", Usage: "list the users", Flags: clientFlags(jsonFlag()),
						Action: clientAction(func(c *cli.Context, cl *api.Client) error {
							users, err := cl.Users(c.Context)
							if err != nil {
								return clientError(err)
							}
							if c.Bool("json") {
								return printJSON(c.App.Writer, users)
							}
							tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
							fmt.Fprintln(tw, "NAME\tROLE\tBANNED\tCREATED")
							for _, u := range users {
								fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", u.Name, u.Role, u.Banned, u.Created.Format("2006-01-02 15:04"))
							}
							return tw.Flush()
						}),
					},
					banCommand("ban", true), banCommand("unban", false),
					{
						Name: "token", Usage: "issue a new token for a user and print it", ArgsUsage: "NAME",
						Flags: clientFlags(&cli.BoolFlag{Name: "revoke", Usage: "revoke the user's other tokens"}),
						Action: func(c *cli.Context) error {
							if c.NArg() != 1 {
								return usageError("admin users token: give one NAME")
							}
							cl, err := client(c)
							if err != nil {
								return err
							}
							cr, err := cl.IssueToken(c.Context, c.Args().First(), c.Bool("revoke"))
							if err != nil {
								return clientError(err)
							}
							fmt.Fprintln(c.App.Writer, cr.Token)
							return nil
						},
					},
				},
			},
			{
				Name: "invite", Usage: "create an invite code and print it",
				Flags: clientFlags(jsonFlag(),
					&cli.StringFlag{Name: "role", Value: "contestant", Usage: "contestant or organiser"},
					&cli.IntFlag{Name: "uses", Value: 1, Usage: "how many people may redeem it"},
					&cli.DurationFlag{Name: "expires", Usage: "valid for this long (default: no expiry)"},
					&cli.StringSliceFlag{Name: "leaderboard", Aliases: []string{"l"}, Usage: "a closed leaderboard it admits to (repeatable)"}),
				Action: clientAction(func(c *cli.Context, cl *api.Client) error {
					inv := api.Invite{Role: api.Role(c.String("role")), Uses: c.Int("uses"), Leaderboards: c.StringSlice("leaderboard")}
					if d := c.Duration("expires"); d > 0 {
						inv.Expires = time.Now().Add(d)
					}
					code, err := cl.CreateInvite(c.Context, inv)
					if err != nil {
						return clientError(err)
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, code)
					}
					fmt.Fprintln(c.App.Writer, code.Invite)
					return nil
				}),
			},
			{
				Name:  "problems",
				Usage: "load problem sets",
				Subcommands: []*cli.Command{{
					Name:      "load",
					Usage:     "load a competition file (KernelBot's format) or one problem directory",
					ArgsUsage: "PATH",
					Flags:     clientFlags(jsonFlag()),
					Action:    runLoadProblems,
				}},
			},
			{
				Name:      "leaderboard",
				Usage:     "open, close, extend a leaderboard or set its rate limits",
				ArgsUsage: "NAME",
				Flags: clientFlags(jsonFlag(),
					&cli.StringFlag{Name: "visibility", Usage: "open (everyone) or closed (invited users only)"},
					&cli.StringFlag{Name: "deadline", Usage: "a new deadline (2006-01-02 15:04, RFC 3339), or none"},
					&cli.DurationFlag{Name: "extend", Usage: "move the deadline this much later"},
					&cli.BoolFlag{Name: "end", Usage: "end it now: the deadline becomes now"},
					&cli.StringSliceFlag{Name: "rate-limit", Usage: "CATEGORY=N submissions per user per hour (test or ranked; -1 removes)"}),
				Action: runAdminLeaderboard,
			},
			{
				Name:  "gpu",
				Usage: "drain a GPU (it takes no more jobs) or undrain it",
				Subcommands: []*cli.Command{
					{
						Name: "drain", Usage: "stop a GPU slot from taking jobs", ArgsUsage: "ID",
						Flags: clientFlags(&cli.StringFlag{Name: "reason", Usage: "why, shown in kernelbox gpus"}),
						Action: clientAction(func(c *cli.Context, cl *api.Client) error {
							id, err := slotArg(c)
							if err != nil {
								return err
							}
							if _, err := cl.Drain(c.Context, id, c.String("reason")); err != nil {
								return clientError(err)
							}
							fmt.Fprintf(c.App.Writer, "drained %s\n", id)
							return nil
						}),
					},
					{
						Name: "undrain", Usage: "let a drained GPU slot take jobs again", ArgsUsage: "ID", Flags: clientFlags(),
						Action: clientAction(func(c *cli.Context, cl *api.Client) error {
							id, err := slotArg(c)
							if err != nil {
								return err
							}
							if _, err := cl.Undrain(c.Context, id); err != nil {
								return clientError(err)
							}
							fmt.Fprintf(c.App.Writer, "undrained %s\n", id)
							return nil
						}),
					},
				},
			},
			{
				Name:  "review",
				Usage: "list the submissions the scanner flagged; clear one (back in the rankings) or confirm it (hacked)",
				Flags: clientFlags(jsonFlag()),
				Action: clientAction(func(c *cli.Context, cl *api.Client) error {
					subs, err := cl.Flagged(c.Context)
					if err != nil {
						return clientError(err)
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, map[string]any{"submissions": subs})
					}
					if len(subs) == 0 {
						fmt.Fprintln(c.App.Writer, "no submission waits for review")
						return nil
					}
					tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tUSER\tLEADERBOARD\tGPU\tSTATUS\tFINDINGS")
					for _, s := range subs {
						var fs []string
						for _, f := range s.Findings {
							fs = append(fs, fmt.Sprintf("%s line %d: %s", f.Rule, f.Line, f.Text))
						}
						fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.User, s.Leaderboard, s.GPUType, s.Status, strings.Join(fs, "; "))
					}
					return tw.Flush()
				}),
				Subcommands: []*cli.Command{
					reviewCommand("clear", api.ReviewCleared, "the flag was a false alarm: put the submission back in the rankings"),
					reviewCommand("confirm", api.ReviewConfirmed, "the submission cheats: mark it hacked"),
				},
			},
			{
				Name:      "hacked",
				Usage:     "mark a submission as hacked (out of the rankings), or --clear it",
				ArgsUsage: "ID",
				Flags:     clientFlags(&cli.BoolFlag{Name: "clear", Usage: "clear the mark"}),
				Action: func(c *cli.Context) error {
					id, err := strconv.ParseInt(c.Args().First(), 10, 64)
					if c.NArg() != 1 || err != nil {
						return usageError("admin hacked: give one submission ID")
					}
					cl, err := client(c)
					if err != nil {
						return err
					}
					sub, err := cl.MarkHacked(c.Context, id, !c.Bool("clear"))
					if err != nil {
						return clientError(err)
					}
					fmt.Fprintf(c.App.Writer, "submission %d hacked: %v\n", sub.ID, sub.Hacked)
					return nil
				},
			},
			{
				Name:      "delete",
				Usage:     "delete a submission and its runs",
				ArgsUsage: "ID",
				Flags:     clientFlags(),
				Action: func(c *cli.Context) error {
					id, err := strconv.ParseInt(c.Args().First(), 10, 64)
					if c.NArg() != 1 || err != nil {
						return usageError("admin delete: give one submission ID")
					}
					cl, err := client(c)
					if err != nil {
						return err
					}
					if err := cl.DeleteSubmission(c.Context, id); err != nil {
						return clientError(err)
					}
					fmt.Fprintf(c.App.Writer, "deleted submission %d\n", id)
					return nil
				},
			},
		},
	}
}

func banCommand(name string, banned bool) *cli.Command {
	return &cli.Command{
		Name: name, Usage: name + " a user", ArgsUsage: "NAME", Flags: clientFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError("admin users %s: give one NAME", name)
			}
			cl, err := client(c)
			if err != nil {
				return err
			}
			u, err := cl.Ban(c.Context, c.Args().First(), banned)
			if err != nil {
				return clientError(err)
			}
			fmt.Fprintf(c.App.Writer, "%s banned: %v\n", u.Name, u.Banned)
			return nil
		},
	}
}

func runLoadProblems(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("admin problems load: give one PATH (a competition .yaml or a problem directory)")
	}
	path := c.Args().First()
	st, err := os.Stat(path)
	if err != nil {
		return usageError("admin problems load: %v", err)
	}
	dir, file, name := path, "", ""
	if abs, err := filepath.Abs(path); err == nil && st.IsDir() {
		name = filepath.Base(abs)
	}
	if !st.IsDir() {
		dir, file = filepath.Dir(path), filepath.Base(path)
	} else if _, err := os.Stat(filepath.Join(path, "task.yml")); err != nil {
		return usageError("admin problems load: %s has no task.yml; give the competition .yaml file for a problem set", path)
	}
	var buf bytes.Buffer
	if err := packProblemSet(&buf, dir); err != nil {
		return usageError("admin problems load: %v", err)
	}
	cl, err := client(c)
	if err != nil {
		return err
	}
	loaded, err := cl.LoadProblems(c.Context, &buf, file, name)
	if err != nil {
		return clientError(err)
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, loaded)
	}
	for _, l := range loaded {
		verb := "updated"
		if l.Created {
			verb = "created"
		}
		fmt.Fprintf(c.App.Writer, "%s %s (gpus %s, deadline %s)\n", verb, l.Leaderboard, strings.Join(l.GPUs, ","), deadlineText(l.Deadline))
		for _, w := range l.Warnings {
			fmt.Fprintf(c.App.Writer, "  warning: %s\n", w)
		}
	}
	return nil
}

func runAdminLeaderboard(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("admin leaderboard: give one NAME")
	}
	name := c.Args().First()
	cl, err := client(c)
	if err != nil {
		return err
	}
	var ch api.LeaderboardChange
	if v := c.String("visibility"); v != "" {
		vis := api.Visibility(v)
		ch.Visibility = &vis
	}
	switch d := c.String("deadline"); {
	case d == "none":
		ch.Deadline = &time.Time{}
	case d != "":
		t, err := problems.ParseDeadline(d)
		if err != nil {
			return usageError("admin leaderboard: --deadline: %v", err)
		}
		ch.Deadline = &t
	}
	if c.Bool("end") {
		now := time.Now().UTC()
		ch.Deadline = &now
	}
	if ext := c.Duration("extend"); ext != 0 {
		lb, err := cl.Leaderboard(c.Context, name)
		if err != nil {
			return clientError(err)
		}
		base := lb.Deadline
		if base.IsZero() {
			return usageError("admin leaderboard: %s has no deadline to extend; set one with --deadline", name)
		}
		t := base.Add(ext)
		ch.Deadline = &t
	}
	for _, rl := range c.StringSlice("rate-limit") {
		cat, n, ok := strings.Cut(rl, "=")
		v, err := strconv.Atoi(n)
		if !ok || err != nil {
			return usageError("admin leaderboard: --rate-limit %q: want CATEGORY=N", rl)
		}
		if ch.RateLimits == nil {
			ch.RateLimits = map[string]int{}
		}
		ch.RateLimits[cat] = v
	}
	lb, err := cl.ChangeLeaderboard(c.Context, name, ch)
	if err != nil {
		return clientError(err)
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, lb)
	}
	fmt.Fprintf(c.App.Writer, "%s: %s, %s, deadline %s, rate limits %v\n", lb.Name, lb.State, lb.Visibility, deadlineText(lb.Deadline), lb.RateLimits)
	return nil
}

// clientAction builds the API client from the flags, the environment and
// the login file before running fn.
func clientAction(fn func(c *cli.Context, cl *api.Client) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		cl, err := client(c)
		if err != nil {
			return err
		}
		return fn(c, cl)
	}
}

// saveProfile downloads a submission's .ncu-rep into path, whole or not
// at all (writeAtomic).
func saveProfile(ctx context.Context, cl *api.Client, id int64, path string) error {
	var apiErr error
	err := writeAtomic(path, func(w io.Writer) error {
		apiErr = cl.Profile(ctx, id, 0, w)
		return apiErr
	})
	switch {
	case apiErr != nil:
		return clientError(apiErr)
	case err != nil:
		return usageError("--profile: %v", err)
	}
	return nil
}

func reviewCommand(name, review, usage string) *cli.Command {
	return &cli.Command{
		Name: name, Usage: usage, ArgsUsage: "ID", Flags: clientFlags(),
		Action: clientAction(func(c *cli.Context, cl *api.Client) error {
			id, err := idArg(c)
			if err != nil {
				return err
			}
			sub, err := cl.Review(c.Context, id, review)
			if err != nil {
				return clientError(err)
			}
			fmt.Fprintf(c.App.Writer, "submission %d: %s (hacked: %v)\n", sub.ID, sub.Review, sub.Hacked)
			return nil
		}),
	}
}
