package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"
	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

// The operator's data commands: backup (through the API, while the daemon
// runs) and the dataset export; restore (restore_linux.go) runs on the
// box itself. docs/backup.md is their manual.

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

func adminExportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "export every submission (code, verdicts, scores) as DIR/submissions.jsonl or .parquet; admin only",
		ArgsUsage: "DIR",
		Flags: clientFlags(
			&cli.StringFlag{Name: "format", Value: "parquet", Usage: "parquet or jsonl"},
			&cli.BoolFlag{Name: "passing", Usage: "only submissions that passed"},
			&cli.BoolFlag{Name: "ranked", Usage: "only ranked (leaderboard-mode) submissions"},
			&cli.BoolFlag{Name: "anonymise", Usage: "pseudonyms in place of user names, stable within this export only"}),
		Action: argAction("DIR", func(c *cli.Context, cl *api.Client, dir string) error {
			format := c.String("format")
			if format != "parquet" && format != "jsonl" {
				return usageError("--format %q: want parquet or jsonl", format)
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			q := api.ExportQuery{Passing: c.Bool("passing"), Ranked: c.Bool("ranked"), Anonymise: c.Bool("anonymise")}
			file := filepath.Join(dir, "submissions."+format)
			n := 0
			err := problems.WriteFileAtomic(file, func(w io.Writer) error {
				if format == "jsonl" {
					cw := &lineCounter{w: w}
					err := cl.Export(c.Context, q, cw)
					n = cw.lines
					return err
				}
				var err error
				n, err = exportParquet(c, cl, q, w)
				return err
			})
			if err != nil {
				return fmt.Errorf("export to %s: %w", file, err)
			}
			fmt.Fprintf(c.App.Writer, "exported %d submissions to %s\n", n, file)
			return nil
		}),
	}
}

// lineCounter counts the JSON lines passing through.
type lineCounter struct {
	w     io.Writer
	lines int
}

func (l *lineCounter) Write(p []byte) (int, error) {
	for _, b := range p {
		if b == '\n' {
			l.lines++
		}
	}
	return l.w.Write(p)
}

// parquetGroup is how many rows one row group holds: the writer keeps a
// group in memory, so a big export never holds every submission's code.
const parquetGroup = 256

// exportParquet writes the export's rows to w as parquet, reading them off
// the API as they come.
func exportParquet(c *cli.Context, cl *api.Client, q api.ExportQuery, w io.Writer) (int, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := cl.Export(c.Context, q, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	n, err := writeParquet(pr, w)
	pr.CloseWithError(fmt.Errorf("export: the writer stopped"))
	if derr := <-done; err == nil {
		err = derr
	}
	return n, err
}

// writeParquet turns JSON lines of api.ExportRow into a parquet file.
func writeParquet(r io.Reader, w io.Writer) (int, error) {
	pw := parquet.NewGenericWriter[api.ExportRow](w, parquet.Compression(&parquet.Zstd))
	dec := json.NewDecoder(r)
	n := 0
	batch := make([]api.ExportRow, 0, 64)
	flush := func() error {
		if _, err := pw.Write(batch); err != nil {
			return err
		}
		batch = batch[:0]
		return nil
	}
	for {
		var row api.ExportRow
		err := dec.Decode(&row)
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, fmt.Errorf("read row %d of the export: %w", n+1, err)
		}
		batch = append(batch, row)
		n++
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return n, err
			}
		}
		if n%parquetGroup == 0 {
			if err := flush(); err != nil {
				return n, err
			}
			if err := pw.Flush(); err != nil {
				return n, err
			}
		}
	}
	if err := flush(); err != nil {
		return n, err
	}
	return n, pw.Close()
}
