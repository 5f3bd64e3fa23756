//go:build linux

package sandbox

import (
	"os"

	"github.com/opencontainers/runc/libcontainer"
	// nsenter's C constructor joins the namespaces before Go starts in the
	// re-executed "init" process.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

// initArg is the argument libcontainer re-executes this binary with to
// start a container's first process.
const initArg = "init"

// The one init() of the codebase (docs/architecture.md, rule 7):
// libcontainer starts a container by re-executing /proc/self/exe with
// "init", and this hook turns that process into the container's init
// before main runs.
func init() {
	if len(os.Args) > 1 && os.Args[1] == initArg {
		libcontainer.Init() // never returns
	}
}
