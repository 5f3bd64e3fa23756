package sandbox

// The name of the cgroup a daemon's runs are made under.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// DefaultCgroupParent is the parent cgroup of the runs of the daemon whose
// data directory is dataDir: "kernelbox-" and the first 8 hex digits of the
// SHA-256 of the absolute, cleaned directory ("kernelbox-3f2a9c1e").
//
// A name of its own per data directory is what keeps two daemons on one
// host apart: each one's start-up sweep (Runtime.CleanStale) reads only its
// own parent, and its Close removes only its own. One daemon holds a data
// directory at a time (its lock), so the name is one daemon's. A hash rather
// than the path itself: a path would nest (cgroup names are path elements)
// or need escaping, and may be longer than a cgroup name may be (255
// bytes); 32 bits keep it short enough to read in systemd-cgtop, and two
// directories of one host collide about once in 4 billion pairs. It is
// stable across restarts, so a restarted daemon finds, and sweeps, what a
// crashed one left under the same name. Symbolic links are not resolved:
// the directory need not exist yet, and its spelling in the config is what
// an operator sees.
func DefaultCgroupParent(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil { // only when the working directory is gone
		abs = dataDir
	}
	sum := sha256.Sum256([]byte(filepath.Clean(abs)))
	return "kernelbox-" + hex.EncodeToString(sum[:4])
}

// CheckCgroupParent says whether name can be a cgroup parent: a relative
// path of one or more plain elements ("kernelbox", "kernelbox.slice/runs"),
// taken from the root of every cgroup hierarchy.
func CheckCgroupParent(name string) error {
	if name == "" || len(name) > 1024 || strings.ContainsRune(name, 0) {
		return fmt.Errorf("cgroup parent %q: want a relative cgroup path of at most 1024 bytes", name)
	}
	if path.IsAbs(name) || path.Clean(name) != name {
		return fmt.Errorf("cgroup parent %q: want a clean relative path, like kernelbox or kernelbox.slice/runs", name)
	}
	for _, e := range strings.Split(name, "/") {
		if e == "." || e == ".." || len(e) > 255 {
			return fmt.Errorf("cgroup parent %q: element %q is not a cgroup name", name, e)
		}
	}
	return nil
}
