package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

// The operator's data commands: backup (through the API, while the daemon
// runs); restore (restore_linux.go) runs on the box itself. docs/backup.md
// is their manual.

func adminBackupCommand() *cli.Command {
	return &cli.Command{
		Name:      "backup",
		Usage:     "write a consistent backup of the running box (database, problems, profiles, admin token) to FILE; admin only",
		ArgsUsage: "FILE",
		Flags:     clientFlags(jsonFlag()),
		Action: argAction("FILE", func(c *cli.Context, cl *api.Client, file string) error {
			var m *api.Manifest
			err := problems.WriteFileAtomic(file, func(w io.Writer) error {
				f := w.(*os.File)
				// It holds every token's hash: for the operator's eyes.
				if err := f.Chmod(0o600); err != nil {
					return err
				}
				if err := cl.Backup(c.Context, f); err != nil {
					return err
				}
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					return err
				}
				var err error
				m, err = api.ReadBackup(bufio.NewReader(f), nil)
				return err
			})
			if err != nil {
				return fmt.Errorf("backup to %s: %w", file, err)
			}
			return output(c, m, func(w io.Writer) error {
				var size int64
				for _, f := range m.Files {
					size += f.Size
				}
				fmt.Fprintf(w, "backup written to %s (kernelbox %s, %s)\n", file, m.Version, m.Created.Format("2006-01-02 15:04:05Z"))
				fmt.Fprintf(w, "store %s: %d users, %d leaderboards, %d submissions (ids up to %d), runs up to %d\n",
					m.Database.StoreID, m.Database.Users, m.Database.Leaderboards, m.Database.Count, m.Database.Submissions, m.Database.Runs)
				_, err := fmt.Fprintf(w, "%d files, %d bytes before compression; every checksum verified\n", len(m.Files), size)
				return err
			})
		}),
	}
}
