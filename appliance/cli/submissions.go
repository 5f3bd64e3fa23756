package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

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
				Action: clientAction(runSubmissionsList),
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
				Action: idAction(runSubmissionShow),
			},
			{
				Name:      "cancel",
				Usage:     "cancel a queued or running submission",
				ArgsUsage: "ID",
				Flags:     clientFlags(jsonFlag()),
				Action: idAction(func(c *cli.Context, cl *api.Client, id int64) error {
					sub, err := cl.Cancel(c.Context, id)
					if err != nil {
						return err
					}
					return output(c, sub, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "submission %d: %s\n", sub.ID, sub.Status)
						return err
					})
				}),
			},
			deleteCommand("delete one of your submissions (its runs, its ranking, its profiles)"),
		},
	}
}

func runSubmissionsList(c *cli.Context, cl *api.Client) error {
	subs, err := cl.Submissions(c.Context, c.String("leaderboard"), c.Bool("all"), c.Int("limit"))
	if err != nil {
		return err
	}
	return output(c, subs, func(w io.Writer) error {
		tw := newTable(w)
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
	})
}

func runSubmissionShow(c *cli.Context, cl *api.Client, id int64) error {
	if c.Bool("wait") {
		if _, err := cl.WaitWith(c.Context, id, nil, api.WaitOptions{Unreachable: sayUnreachable(c.App.ErrWriter)}); err != nil {
			return err
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
		return err
	}
	doc := struct {
		*api.SubmissionView
		Result *api.SubmitResult `json:"result,omitempty"`
	}{SubmissionView: v}
	if api.Ended(v.Status) {
		r := api.ResultOf(&v.Submission)
		doc.Result = &r
	}
	return output(c, doc, func(w io.Writer) error {
		fmt.Fprintf(w, "submission %d by %s: %s on %s, mode %s, %s, submitted %s\n", v.ID, v.User, v.Leaderboard, v.GPUType,
			v.Mode, v.Status, v.Created.Format(time.RFC3339))
		if doc.Result != nil {
			printResult(w, *doc.Result, c.Bool("verbose"))
		}
		if v.Code != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimRight(v.Code, "\n"))
		}
		return nil
	})
}

// saveProfile downloads a submission's .ncu-rep into path, whole or not
// at all.
func saveProfile(ctx context.Context, cl *api.Client, id int64, path string) error {
	var apiErr error
	err := problems.WriteFileAtomic(path, func(w io.Writer) error {
		apiErr = cl.Profile(ctx, id, 0, w)
		return apiErr
	})
	switch {
	case apiErr != nil:
		return apiErr
	case err != nil:
		return usageError("--profile: %v", err)
	}
	return nil
}

// deleteCommand deletes a submission: the contestant's own (`submissions
// delete`) or, for staff, anyone's (`admin delete`), through one route.
func deleteCommand(usage string) *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     usage,
		ArgsUsage: "ID",
		Flags:     clientFlags(),
		Action: idAction(func(c *cli.Context, cl *api.Client, id int64) error {
			if err := cl.DeleteSubmission(c.Context, id); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "deleted submission %d\n", id)
			return nil
		}),
	}
}
