//go:build linux && cgo

package cli

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance"
)

// restore works on the data directory itself, not through the API: the
// daemon must be stopped, and restore takes its lock to be sure.

func adminRestoreCommand() *cli.Command {
	return &cli.Command{
		Name: "restore",
		Usage: "restore a backup into a stopped daemon's data directory (refused while a daemon runs on it, " +
			"or over a newer database unless --force); ids handed out after the backup are never reused",
		ArgsUsage: "FILE",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", Usage: "the data directory to restore into (default: the config's data, else " + appliance.DefaultConfig().DataDir + ")"},
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{"KERNELBOX_CONFIG"},
				Usage: "the daemon's config file, for its data directory (default " + defaultConfigFile + " when it exists)"},
			&cli.BoolFlag{Name: "force", Usage: "replace a database newer than the backup, or another box's"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError("%s: give one FILE", c.Command.FullName())
			}
			dir, err := restoreDir(c)
			if err != nil {
				return err
			}
			res, err := appliance.Restore(c.Context, c.Args().First(), dir, appliance.RestoreOptions{Force: c.Bool("force")})
			if err != nil {
				return err
			}
			return output(c, res, func(w io.Writer) error {
				m := res.Manifest
				fmt.Fprintf(w, "restored the backup of %s (store %s) into %s\n", m.Created.Format("2006-01-02 15:04:05Z"), m.Database.StoreID, dir)
				fmt.Fprintf(w, "%d users, %d leaderboards, %d submissions, %d files\n", m.Database.Users, m.Database.Leaderboards, m.Database.Count, len(m.Files))
				if r := res.Replaced; r != nil {
					fmt.Fprintf(w, "replaced a database of store %s with %d submissions (ids up to %d)\n", r.StoreID, r.Count, r.Submissions)
				}
				for _, lost := range []struct {
					what string
					ids  [2]int64
				}{{"submissions", res.LostSubmissions}, {"runs", res.LostRuns}} {
					if lost.ids[1] > 0 {
						fmt.Fprintf(w, "lost: %s %d to %d, handed out after the backup; their ids are not handed out again\n", lost.what, lost.ids[0], lost.ids[1])
					}
				}
				_, err := fmt.Fprintf(w, "next ids: submission %d, run %d; start the daemon as usual\n", res.Marks.Submissions+1, res.Marks.Runs+1)
				return err
			})
		},
	}
}

// restoreDir is --data, else the daemon's config's data directory (the
// flag's file, else the package's when it exists), else the default:
// a restore must land where the daemon will look.
func restoreDir(c *cli.Context) (string, error) {
	if d := c.String("data"); d != "" {
		return d, nil
	}
	path := c.String("config")
	if path == "" {
		if !fileExists(defaultConfigFile) {
			return appliance.DefaultConfig().DataDir, nil
		}
		path = defaultConfigFile
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return "", usageError("restore: %v", err)
	}
	return cfg.DataDir, nil
}
