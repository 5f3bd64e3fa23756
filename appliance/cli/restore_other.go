//go:build !linux || !cgo

package cli

import "github.com/urfave/cli/v2"

// adminRestoreCommand is the box's own (it opens the database); the
// contestant's build names it and says so.
func adminRestoreCommand() *cli.Command {
	return linuxOnly("restore", "restore a backup into a stopped daemon's data directory (the box's build only: Linux with cgo)")
}
