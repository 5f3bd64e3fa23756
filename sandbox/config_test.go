//go:build linux

package sandbox

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/runc/libcontainer/configs"

	"kernelbox/policies"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// goldenSpec is a spec that does not depend on the host.
func goldenSpec() *Spec {
	l := policies.DefaultLimits()
	l.WallTime = time.Minute
	l.Cpuset = "0-3"
	return &Spec{
		Args: []string{"/usr/bin/python3", "eval.py", "test", "cases.txt"}, Env: []string{"PATH=/usr/bin"},
		Binds:   []Bind{{Source: "/usr"}, {Source: "/opt/venv"}, {Source: "/data/cache", Destination: "/cache", Writable: true}},
		Devices: []Device{{Path: "/dev/nvidia0", Type: 'c', Major: 195, Minor: 0}, {Path: "/dev/nvidiactl", Type: 'c', Major: 195, Minor: 255}},
		Limits:  l, UID: Nobody, GID: Nobody,
	}
}

// TestConfig_Golden builds the libcontainer config of a run as plain data,
// without root, and compares it with testdata/config.golden.json (refresh
// with go test ./sandbox -run Golden -update). A change to a security
// setting shows up as a reviewed diff of that file.
func TestConfig_Golden(t *testing.T) {
	t.Parallel()
	c := configFor("kb-golden", "/var/lib/kernelbox/runs/kb-golden/rootfs", "kernelbox", goldenSpec())
	got, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "config.golden.json")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(strings.TrimSpace(string(want)), strings.TrimSpace(string(got))); diff != "" {
		t.Errorf("config differs from %s (-golden +now):\n%s", path, diff)
	}
}

// TestConfig_Properties checks the security choices directly, so a golden
// file refreshed in haste cannot hide them.
func TestConfig_Properties(t *testing.T) {
	t.Parallel()
	c := configFor("kb-x", "/r", "kernelbox", goldenSpec())
	if !c.Readonlyfs || !c.NoNewPrivileges {
		t.Errorf("Readonlyfs %v, NoNewPrivileges %v; want both", c.Readonlyfs, c.NoNewPrivileges)
	}
	if caps := c.Capabilities; caps == nil || len(caps.Bounding)+len(caps.Effective)+len(caps.Permitted)+len(caps.Inheritable)+len(caps.Ambient) != 0 {
		t.Errorf("capabilities %+v, want none", caps)
	}
	for _, ns := range []configs.NamespaceType{configs.NEWNS, configs.NEWPID, configs.NEWIPC, configs.NEWUTS, configs.NEWNET, configs.NEWCGROUP} {
		if !c.Namespaces.Contains(ns) {
			t.Errorf("no %s namespace", ns)
		}
	}
	if c.Namespaces.Contains(configs.NEWUSER) {
		t.Error("a user namespace: the run is an unprivileged uid already")
	}
	for _, r := range c.Cgroups.Resources.Devices {
		if strings.Contains(string(r.Permissions), "m") || r.Major < 0 || r.Minor < 0 {
			t.Errorf("device rule %+v allows mknod or a wildcard", r)
		}
	}
	if c.Cgroups.Resources.MemorySwap != c.Cgroups.Resources.Memory {
		t.Errorf("swap %d != memory %d: swap on top of the limit", c.Cgroups.Resources.MemorySwap, c.Cgroups.Resources.Memory)
	}
	if c.Seccomp == nil || c.Seccomp.DefaultAction != configs.Errno || len(c.Seccomp.Architectures) != 1 {
		t.Errorf("seccomp %+v, want an errno default on one architecture", c.Seccomp)
	}
	for _, m := range c.Mounts {
		if m.Device == "bind" && m.Destination != "/cache" && m.Flags&0x1 == 0 { // MS_RDONLY
			t.Errorf("bind %s is writable", m.Destination)
		}
	}
}
