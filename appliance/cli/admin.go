package cli

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

// adminCommand holds the organisers' and admins' commands, one builder a
// group.
func adminCommand() *cli.Command {
	return &cli.Command{
		Name:  "admin",
		Usage: "organiser and admin commands",
		Subcommands: []*cli.Command{
			adminUsersCommand(),
			adminInviteCommand(),
			adminInvitesCommand(),
			{
				Name:  "problems",
				Usage: "load problem sets",
				Subcommands: []*cli.Command{{
					Name: "load",
					Usage: "load a competition file (KernelBot's format) or one problem directory; a name already on the " +
						"box is refused unless --replace, and a competition's problems that load do, the others named",
					ArgsUsage: "PATH",
					Flags: clientFlags(jsonFlag(),
						&cli.BoolFlag{Name: "replace", Usage: "replace the problems of leaderboards of the same names (their seeds, submissions and settings stay)"},
						&cli.BoolFlag{Name: "dry-run", Usage: "say what loading would do and change nothing"},
						&cli.StringSliceFlag{Name: "gpus", Usage: "the GPU types every problem ranks on, in place of the set's (a KernelBot set names B200, the box has H200)"}),
					Action: runLoadProblems,
				}},
			},
			adminLeaderboardCommand(),
			adminGPUCommand(),
			adminQueueCommand(),
			adminStatsCommand(),
			adminReviewCommand(),
			{
				Name:      "hacked",
				Usage:     "mark a submission as hacked (out of the rankings), or --clear it",
				ArgsUsage: "ID",
				Flags:     clientFlags(&cli.BoolFlag{Name: "clear", Usage: "clear the mark"}),
				Action: idAction(func(c *cli.Context, cl *api.Client, id int64) error {
					sub, err := cl.MarkHacked(c.Context, id, !c.Bool("clear"))
					if err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "submission %d hacked: %v\n", sub.ID, sub.Hacked)
					return nil
				}),
			},
			deleteCommand("delete a submission and its runs"),
			adminBackupCommand(),
			adminRestoreCommand(),
			adminExportCommand(),
		},
	}
}

func adminUsersCommand() *cli.Command {
	return &cli.Command{
		Name:  "users",
		Usage: "add, list, ban users and issue tokens",
		Subcommands: []*cli.Command{
			{
				Name: "add", Usage: "add a user and print their token", ArgsUsage: "NAME",
				Flags: clientFlags(jsonFlag(), &cli.StringFlag{Name: "role", Value: "contestant", Usage: "contestant, organiser or admin"}),
				Action: argAction("NAME", func(c *cli.Context, cl *api.Client, name string) error {
					cr, err := cl.AddUser(c.Context, name, api.Role(c.String("role")))
					if err != nil {
						return err
					}
					return output(c, cr, func(w io.Writer) error {
						_, err := fmt.Fprintln(w, cr.Token)
						return err
					})
				}),
			},
			{
				Name: "list", Usage: "list the users", Flags: clientFlags(jsonFlag()),
				Action: clientAction(func(c *cli.Context, cl *api.Client) error {
					users, err := cl.Users(c.Context)
					if err != nil {
						return err
					}
					return output(c, users, func(w io.Writer) error {
						tw := newTable(w)
						fmt.Fprintln(tw, "NAME\tROLE\tBANNED\tCREATED")
						for _, u := range users {
							fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", u.Name, u.Role, u.Banned, u.Created.Format("2006-01-02 15:04"))
						}
						return tw.Flush()
					})
				}),
			},
			banCommand("ban", true), banCommand("unban", false),
			{
				Name: "token", Usage: "issue a new token for a user and print it", ArgsUsage: "NAME",
				Flags: clientFlags(&cli.BoolFlag{Name: "revoke", Usage: "revoke the user's other tokens"}),
				Action: argAction("NAME", func(c *cli.Context, cl *api.Client, name string) error {
					cr, err := cl.IssueToken(c.Context, name, c.Bool("revoke"))
					if err != nil {
						return err
					}
					fmt.Fprintln(c.App.Writer, cr.Token)
					return nil
				}),
			},
		},
	}
}

func banCommand(name string, banned bool) *cli.Command {
	return &cli.Command{
		Name: name, Usage: name + " a user", ArgsUsage: "NAME", Flags: clientFlags(),
		Action: argAction("NAME", func(c *cli.Context, cl *api.Client, user string) error {
			u, err := cl.Ban(c.Context, user, banned)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "%s banned: %v\n", u.Name, u.Banned)
			return nil
		}),
	}
}

func adminInviteCommand() *cli.Command {
	return &cli.Command{
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
				return err
			}
			return output(c, code, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, code.Invite)
				return err
			})
		}),
	}
}

// adminInvitesCommand lists and revokes invites: the codes are stored
// hashed, so each is named by the id `admin invite --json` printed.
func adminInvitesCommand() *cli.Command {
	return &cli.Command{
		Name:  "invites",
		Usage: "list or revoke invite codes",
		Subcommands: []*cli.Command{
			{
				Name: "list", Usage: "list the invites, with the uses they have left",
				Flags: clientFlags(jsonFlag()),
				Action: clientAction(func(c *cli.Context, cl *api.Client) error {
					invs, err := cl.Invites(c.Context)
					if err != nil {
						return err
					}
					return output(c, invs, func(w io.Writer) error {
						tw := newTable(w)
						fmt.Fprintln(tw, "ID\tROLE\tUSES LEFT\tEXPIRES\tCREATED\tLEADERBOARDS")
						for _, inv := range invs {
							expires := "never"
							if !inv.Expires.IsZero() {
								expires = inv.Expires.Format("2006-01-02 15:04Z")
							}
							scope := strings.Join(inv.Leaderboards, ",")
							if scope == "" {
								scope = "-"
							}
							fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", inv.ID, inv.Role, inv.UsesLeft, expires,
								inv.Created.Format("2006-01-02 15:04Z"), scope)
						}
						return tw.Flush()
					})
				}),
			},
			{
				Name: "revoke", Usage: "revoke an invite, so it admits nobody more (those it admitted stay)", ArgsUsage: "ID|CODE",
				Flags: clientFlags(),
				Action: argAction("ID or CODE", func(c *cli.Context, cl *api.Client, ref string) error {
					rev, err := cl.RevokeInvite(c.Context, ref)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(c.App.Writer, "revoked invite %s\n", rev.Revoked)
					return err
				}),
			},
		},
	}
}

func adminLeaderboardCommand() *cli.Command {
	return &cli.Command{
		Name:      "leaderboard",
		Usage:     "open, close, extend a leaderboard, set its rate limits or the GPU types it ranks on",
		ArgsUsage: "NAME",
		Flags: clientFlags(jsonFlag(),
			&cli.StringFlag{Name: "visibility", Usage: "open (everyone) or closed (invited users only)"},
			&cli.StringFlag{Name: "deadline", Usage: "a new deadline (2006-01-02 15:04, RFC 3339), or none"},
			&cli.DurationFlag{Name: "extend", Usage: "move the deadline this much later"},
			&cli.BoolFlag{Name: "end", Usage: "end it now: the deadline becomes now"},
			&cli.StringSliceFlag{Name: "rate-limit", Usage: "CATEGORY=N submissions per user per hour (test or ranked; -1 removes)"},
			&cli.StringSliceFlag{Name: "gpus", Usage: "the GPU types it ranks on, replacing the problem set's (H200,H100; each type keeps its own ranking)"},
			&cli.BoolFlag{Name: "delete", Usage: "delete it (one an organiser loaded; refused while it has submissions, unless --force)"},
			&cli.BoolFlag{Name: "force", Usage: "with --delete: delete its submissions, runs and rankings with it"}),
		Action: argAction("NAME", runAdminLeaderboard),
	}
}

func adminGPUCommand() *cli.Command {
	slot := func(verb string, do func(c *cli.Context, cl *api.Client, id string) error) cli.ActionFunc {
		return argAction("slot ID (kernelbox gpus lists them)", func(c *cli.Context, cl *api.Client, id string) error {
			if err := do(c, cl, id); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "%s %s\n", verb, id)
			return nil
		})
	}
	return &cli.Command{
		Name:  "gpu",
		Usage: "drain a GPU (it takes no more jobs) or undrain it",
		Subcommands: []*cli.Command{
			{
				Name: "drain", Usage: "stop a GPU slot from taking jobs", ArgsUsage: "ID",
				Flags: clientFlags(&cli.StringFlag{Name: "reason", Usage: "why, shown in kernelbox gpus"}),
				Action: slot("drained", func(c *cli.Context, cl *api.Client, id string) error {
					_, err := cl.Drain(c.Context, id, c.String("reason"))
					return err
				}),
			},
			{
				Name: "undrain", Usage: "let a drained GPU slot take jobs again", ArgsUsage: "ID", Flags: clientFlags(),
				Action: slot("undrained", func(c *cli.Context, cl *api.Client, id string) error {
					_, err := cl.Undrain(c.Context, id)
					return err
				}),
			},
		},
	}
}

// adminQueueCommand pauses and resumes the whole box: every slot drained
// (running jobs finish, queued ones wait, submissions are still taken)
// and back, across restarts too.
func adminQueueCommand() *cli.Command {
	return &cli.Command{
		Name:  "queue",
		Usage: "pause the queue (no job starts; submissions are still taken) or resume it",
		Subcommands: []*cli.Command{
			{
				Name: "pause", Usage: "stop every GPU slot from starting jobs; running ones finish",
				Flags: clientFlags(&cli.StringFlag{Name: "reason", Usage: "why, shown in kernelbox gpus"}),
				Action: clientAction(func(c *cli.Context, cl *api.Client) error {
					st, err := cl.Pause(c.Context, c.String("reason"))
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(c.App.Writer, "paused: %d slots take no jobs until kernelbox admin queue resume\n", len(st.Slots))
					return err
				}),
			},
			{
				Name: "resume", Usage: "let the slots a pause stopped take jobs again", Flags: clientFlags(),
				Action: clientAction(func(c *cli.Context, cl *api.Client) error {
					st, err := cl.Resume(c.Context)
					if err != nil {
						return err
					}
					drained := 0
					for _, sl := range st.Slots {
						if sl.Drained != "" {
							drained++
						}
					}
					_, err = fmt.Fprintf(c.App.Writer, "resumed: %d of %d slots take jobs\n", len(st.Slots)-drained, len(st.Slots))
					return err
				}),
			},
		},
	}
}

func adminStatsCommand() *cli.Command {
	return &cli.Command{
		Name:  "stats",
		Usage: "count users, submissions and GPU time, ever or over the last --since",
		Flags: clientFlags(jsonFlag(), &cli.DurationFlag{Name: "since", Usage: "only this far back (24h: the last day)"}),
		Action: clientAction(func(c *cli.Context, cl *api.Client) error {
			var since time.Time
			if d := c.Duration("since"); d > 0 {
				since = time.Now().Add(-d)
			}
			st, err := cl.Stats(c.Context, since)
			if err != nil {
				return err
			}
			return output(c, st, func(w io.Writer) error { return printStats(w, st) })
		}),
	}
}

func printStats(w io.Writer, st *api.Stats) error {
	when := "ever"
	if !st.Since.IsZero() {
		when = "since " + st.Since.Format("2006-01-02 15:04Z")
	}
	fmt.Fprintf(w, "%s: %d submissions from %d of %d users (%d banned); %d flagged for review, %d hacked\n",
		when, st.Submissions, st.ActiveUsers, st.Users, st.Banned, st.Flagged, st.Hacked)
	tw := newTable(w)
	for _, group := range []struct {
		name   string
		counts map[string]int
	}{{"status", st.ByStatus}, {"mode", st.ByMode}, {"leaderboard", st.ByLeaderboard}} {
		keys := make([]string, 0, len(group.counts))
		for k := range group.counts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", group.name, k, group.counts[k])
		}
	}
	gpus := make([]string, 0, len(st.GPUSeconds))
	for g := range st.GPUSeconds {
		gpus = append(gpus, g)
	}
	sort.Strings(gpus)
	for _, g := range gpus {
		fmt.Fprintf(tw, "GPU time\t%s\t%.0f s\n", g, st.GPUSeconds[g])
	}
	return tw.Flush()
}

func adminReviewCommand() *cli.Command {
	return &cli.Command{
		Name:  "review",
		Usage: "list the submissions the scanner flagged; clear one (back in the rankings) or confirm it (hacked)",
		Flags: clientFlags(jsonFlag()),
		Action: clientAction(func(c *cli.Context, cl *api.Client) error {
			subs, err := cl.Flagged(c.Context)
			if err != nil {
				return err
			}
			return output(c, api.Flagged{Submissions: subs}, func(w io.Writer) error {
				if len(subs) == 0 {
					_, err := fmt.Fprintln(w, "no submission waits for review")
					return err
				}
				tw := newTable(w)
				fmt.Fprintln(tw, "ID\tUSER\tLEADERBOARD\tGPU\tSTATUS\tFINDINGS")
				for _, s := range subs {
					var fs []string
					for _, f := range s.Findings {
						if f.Line == 0 {
							// A finding of the run's timings (PHYSICS_FLOOR), not of a line of code.
							fs = append(fs, fmt.Sprintf("%s: %s", f.Rule, f.Message))
							continue
						}
						fs = append(fs, fmt.Sprintf("%s line %d: %s", f.Rule, f.Line, f.Text))
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.User, s.Leaderboard, s.GPUType, s.Status, strings.Join(fs, "; "))
				}
				return tw.Flush()
			})
		}),
		Subcommands: []*cli.Command{
			reviewCommand("clear", api.ReviewCleared, "the flag was a false alarm: put the submission back in the rankings"),
			reviewCommand("confirm", api.ReviewConfirmed, "the submission cheats: mark it hacked"),
		},
	}
}

func reviewCommand(name, review, usage string) *cli.Command {
	return &cli.Command{
		Name: name, Usage: usage, ArgsUsage: "ID", Flags: clientFlags(),
		Action: idAction(func(c *cli.Context, cl *api.Client, id int64) error {
			sub, err := cl.Review(c.Context, id, review)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "submission %d: %s (hacked: %v)\n", sub.ID, sub.Review, sub.Hacked)
			return nil
		}),
	}
}

// gpuList reads --gpus, given as a list, repeated, or both.
func gpuList(flags []string) []string {
	var out []string
	for _, g := range flags {
		for _, one := range strings.Split(g, ",") {
			if one = strings.TrimSpace(one); one != "" {
				out = append(out, one)
			}
		}
	}
	return out
}

func runAdminLeaderboard(c *cli.Context, cl *api.Client, name string) error {
	if c.Bool("delete") {
		for _, f := range []string{"visibility", "deadline", "extend", "end", "rate-limit", "gpus"} {
			if c.IsSet(f) {
				return usageError("admin leaderboard: --delete takes no --%s", f)
			}
		}
		gone, err := cl.DeleteLeaderboard(c.Context, name, c.Bool("force"))
		if err != nil {
			return err
		}
		return output(c, gone, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "deleted leaderboard %s and its %d submissions\n", gone.Leaderboard, gone.Submissions)
			return err
		})
	}
	if c.Bool("force") {
		return usageError("admin leaderboard: --force goes with --delete")
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
			return err
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
	ch.GPUs = gpuList(c.StringSlice("gpus"))
	if c.IsSet("gpus") && len(ch.GPUs) == 0 {
		return usageError("admin leaderboard: --gpus names no GPU type")
	}
	lb, err := cl.ChangeLeaderboard(c.Context, name, ch)
	if err != nil {
		return err
	}
	return output(c, lb, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s: %s, %s, deadline %s, rate limits %v, gpus %s (this box runs %s)\n", lb.Name, lb.State, lb.Visibility,
			deadlineText(lb.Deadline), lb.RateLimits, strings.Join(lb.GPUs, ","), orNone(lb.Available))
		return err
	})
}

func orNone(ss []string) string {
	if len(ss) == 0 {
		return "none of them"
	}
	return strings.Join(ss, ",")
}
