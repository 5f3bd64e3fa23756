package runner

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"

	"golang.org/x/sys/unix"

	"kernelbox/appliance/store"
	"kernelbox/problems"
)

// How a run was kept from the machine that ran it. Every run's system
// info says so (its "isolation"), so that a result from a machine
// without the sandbox (a Slurm node whose config says sandbox: false, a
// box serving with --no-sandbox) can be told from the others: its code
// ran with that machine's rights, as root with the network up on a node.
// A coordinator does not rank such a run unless its organiser says so
// (slurm.rank_unsandboxed), and a leaderboard marks it where it ranks.

// logIsolation is the system-info key of a run's isolation.
const logIsolation = "isolation"

// Isolation is how a run was isolated, as its system info records it.
type Isolation struct {
	// Sandbox is whether the run went into the sandbox (namespaces,
	// seccomp, cgroups, no network, uid 65534).
	Sandbox bool   `json:"sandbox"`
	Node    string `json:"node"`
	// Kernel is the machine's kernel release (uname -r): the sandbox's
	// walls are the kernel's.
	Kernel string `json:"kernel"`
	// Runtime is what made the sandbox, like "libcontainer v1.5.3", or
	// "none".
	Runtime string `json:"runtime"`
}

// hostIsolation is this machine's isolation of its runs, the sandbox on
// or off.
func hostIsolation(sandbox bool) Isolation {
	iso := Isolation{Sandbox: sandbox, Kernel: kernelRelease(), Runtime: "none"}
	iso.Node, _ = os.Hostname()
	if sandbox {
		iso.Runtime = "libcontainer " + libcontainerVersion()
	}
	return iso
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// libcontainerVersion is the version of runc's libcontainer linked in,
// from the binary's build info ("unknown" in a binary without it).
var libcontainerVersion = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/opencontainers/runc" {
				if m.Replace != nil {
					m = m.Replace
				}
				return m.Version
			}
		}
	}
	return "unknown"
})

// IsolationOf reads a run's isolation from its system info; ok is false
// when the info does not say (a node of another version).
func IsolationOf(info map[string]any) (iso Isolation, ok bool) {
	switch v := info[logIsolation].(type) {
	case Isolation:
		return v, true
	case map[string]any: // as a node's report decodes
		sb, ok := v["sandbox"].(bool)
		if !ok {
			return Isolation{}, false
		}
		iso.Sandbox = sb
		iso.Node, _ = v["node"].(string)
		iso.Kernel, _ = v["kernel"].(string)
		iso.Runtime, _ = v["runtime"].(string)
		return iso, true
	}
	return Isolation{}, false
}

// isolationVerdict is what a run's isolation means for its submission:
// unsandboxed when it ran without the sandbox, or its machine did not say
// how it ran; and, for a ranked run that is not to rank such runs
// (unrank), why it is kept out of the rankings. A secret run's reason
// does not name its node: its owner does not see where it ran.
func isolationVerdict(rc *store.RunContext, info map[string]any, unrank bool) (unsandboxed bool, unranked string) {
	iso, ok := IsolationOf(info)
	if ok && iso.Sandbox {
		return false, ""
	}
	if !unrank || rc.Run.Mode != string(problems.ModeLeaderboard) {
		return true, ""
	}
	which := "this run"
	if rc.Run.Secret {
		which = "the secret-seed run"
	}
	how := "without the sandbox"
	switch {
	case !ok:
		how = "on a node that did not say how it isolated the run"
	case !rc.Run.Secret && iso.Node != "":
		how += " on node " + iso.Node
	}
	return true, fmt.Sprintf("not ranked: %s ran %s, and this coordinator ranks only sandboxed runs (slurm.rank_unsandboxed is off)",
		which, how)
}
