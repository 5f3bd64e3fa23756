package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

// boardCommands show what the box offers and how busy it is.
func boardCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name:   "leaderboards",
			Usage:  "list the leaderboards with their GPU types, deadline and state",
			Flags:  clientFlags(jsonFlag()),
			Action: clientAction(runLeaderboards),
		},
		{
			Name:      "leaderboard",
			Usage:     "show a leaderboard's ranking",
			ArgsUsage: "NAME",
			Flags:     clientFlags(jsonFlag(), &cli.StringFlag{Name: "gpu", Usage: "one GPU type (default: every one)"}),
			Action:    argAction("leaderboard NAME", runLeaderboard),
		},
		{
			Name:   "queue",
			Usage:  "show the queue: depth per GPU type, your jobs, their position and ETA",
			Flags:  clientFlags(jsonFlag()),
			Action: clientAction(runQueue),
		},
		{
			Name:   "gpus",
			Usage:  "list the box's GPUs (and CPU-backend slots) and what each is doing",
			Flags:  clientFlags(jsonFlag()),
			Action: clientAction(runGPUs),
		},
	}
}

func runLeaderboards(c *cli.Context, cl *api.Client) error {
	lbs, err := cl.Leaderboards(c.Context)
	if err != nil {
		return err
	}
	return output(c, lbs, func(w io.Writer) error {
		tw := newTable(w)
		fmt.Fprintln(tw, "NAME\tSTATE\tVISIBILITY\tDEADLINE\tGPUS\tHERE")
		for _, lb := range lbs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", lb.Name, lb.State, lb.Visibility, deadlineText(lb.Deadline),
				strings.Join(lb.GPUs, ","), strings.Join(lb.Available, ","))
		}
		return tw.Flush()
	})
}

func runLeaderboard(c *cli.Context, cl *api.Client, name string) error {
	rk, err := cl.Ranking(c.Context, name, c.String("gpu"))
	if err != nil {
		return err
	}
	var doc any = rk
	if c.String("gpu") != "" && len(rk.Rankings) == 1 {
		doc = rk.Rankings[0].Rows
	}
	return output(c, doc, func(w io.Writer) error {
		for _, r := range rk.Rankings {
			fmt.Fprintf(w, "%s on %s (ranked by %s of the benchmark means)\n", rk.Leaderboard, r.GPU, rk.RankingBy)
			if rk.TimedBy == problems.TimedByProblem {
				fmt.Fprintf(w, "  %s\n", problems.TimedByNote)
			}
			if len(r.Rows) == 0 {
				fmt.Fprintln(w, "  no ranked submissions yet")
				continue
			}
			tw := newTable(w)
			fmt.Fprintln(tw, "  RANK\tUSER\tSCORE\t±\tSUBMISSION\tWHEN")
			ties, bare := false, false
			for _, row := range r.Rows {
				rank := strconv.Itoa(row.Rank)
				if row.Tie {
					rank, ties = "≈"+rank, true
				}
				user := row.User
				if row.Unsandboxed {
					user, bare = user+" [no sandbox]", true
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\n", rank, user, problems.FormatNS(row.Score*1e9),
					problems.FormatNS(row.Interval*1e9), row.Submission, row.At.Format("2006-01-02 15:04"))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if ties {
				fmt.Fprintln(w, "  ≈: a statistical tie with the entry above (their intervals overlap)")
			}
			if bare {
				fmt.Fprintln(w, "  [no sandbox]: ran without the sandbox, with the rights of the node that ran it (ranked by the organiser's leave)")
			}
		}
		return nil
	})
}

func runQueue(c *cli.Context, cl *api.Client) error {
	q, err := cl.Queue(c.Context)
	if err != nil {
		return err
	}
	return output(c, q, func(w io.Writer) error {
		tw := newTable(w)
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
	})
}

func runGPUs(c *cli.Context, cl *api.Client) error {
	st, err := cl.GPUs(c.Context)
	if err != nil {
		return err
	}
	return output(c, st, func(w io.Writer) error {
		switch st.Vendor {
		case "none":
			fmt.Fprintf(w, "no GPUs: %s\n", strings.Join(st.Notes, "; "))
		case "slurm":
			fmt.Fprintf(w, "runs go to Slurm: %s\n", strings.Join(st.Notes, "; "))
		default:
			fmt.Fprintf(w, "%s driver %s\n", st.Vendor, st.Driver)
		}
		if st.Profiler != "" {
			fmt.Fprintln(w, st.Profiler)
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "SLOT\tTYPE\tNAME\tPCI\tNUMA\tNVLINK\tCPUS\tCLOCKS\tNOW\tSTATE\tJOB")
		for _, s := range st.Slots {
			fmt.Fprintln(tw, slotRow(s))
		}
		return tw.Flush()
	})
}

// slotRow is one slot's line of `kernelbox gpus`.
func slotRow(s api.SlotState) string {
	name, pci, numa, links := "CPU backend", "-", "-", "-"
	if strings.HasPrefix(s.ID, "slurm:") {
		name = "Slurm pool"
	}
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
	if s.Remote != "" {
		state += " (" + s.Remote + ")"
	}
	clocks, now := "-", "-"
	if s.Clocks != "" {
		clocks, _, _ = strings.Cut(s.Clocks, " (")
	}
	if t := s.Now; t != nil {
		now = fmt.Sprintf("%d°C %d MHz %d W %d procs", t.TempC, t.SMClockMHz, t.PowerMW/1000, t.Processes)
	}
	return strings.Join([]string{s.ID, s.GPUType, name, pci, numa, links, s.Cpuset, clocks, now, state, job}, "\t")
}
