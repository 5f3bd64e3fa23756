//go:build linux

package sandbox

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/opencontainers/cgroups"
	// Registers the device-cgroup manager; without it libcontainer refuses
	// configs with device rules.
	_ "github.com/opencontainers/cgroups/devices"
	devconfig "github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"golang.org/x/sys/unix"

	"kernelbox/policies"
)

// The config is built as plain data by small configure functions, so it
// can be read, validated and compared with a golden file without root.

// configFor builds the libcontainer config of one run.
func configFor(id, rootfs, cgroupParent string, s *Spec) *configs.Config {
	c := &configs.Config{
		Rootfs: rootfs,
		// The root is an empty directory of ours; only binds and tmpfs are
		// writable where they say so.
		Readonlyfs: true,
		Hostname:   "kernelbox",
		// If the daemon dies, the run dies with it rather than run on unowned.
		ParentDeathSignal: int(unix.SIGKILL),
		NoNewPrivileges:   true,
	}
	configureNamespaces(c)
	configureCapabilities(c)
	configureMounts(c, s)
	configureDevices(c, s)
	configureCgroups(c, id, cgroupParent, s.Limits)
	configureRlimits(c, s.Limits)
	if s.Loopback {
		c.Seccomp = seccompConfig(policies.LoopbackSeccomp())
	} else {
		c.Seccomp = seccompConfig(policies.DefaultSeccomp())
	}
	return c
}

func configureNamespaces(c *configs.Config) {
	// Every namespace but the user namespace: the run is an unprivileged uid
	// on the host already, and a new network namespace holds only loopback.
	c.Namespaces = configs.Namespaces{
		{Type: configs.NEWNS}, {Type: configs.NEWPID}, {Type: configs.NEWIPC},
		{Type: configs.NEWUTS}, {Type: configs.NEWNET}, {Type: configs.NEWCGROUP},
	}
	c.Networks = []*configs.Network{{Type: "loopback"}}
}

func configureCapabilities(c *configs.Config) {
	// No capabilities at all, in any set: a contestant's code needs none.
	c.Capabilities = &configs.Capabilities{}
}

const (
	mountNoExec = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	mountExec   = unix.MS_NOSUID | unix.MS_NODEV
)

func configureMounts(c *configs.Config, s *Spec) {
	size := s.Limits.TmpSize
	owner := fmt.Sprintf("uid=%d,gid=%d", s.UID, s.GID)
	c.Mounts = []*configs.Mount{
		{Source: "proc", Destination: "/proc", Device: "proc", Flags: mountNoExec},
		{Source: "tmpfs", Destination: "/dev", Device: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_STRICTATIME, Data: "mode=755,size=65536k"},
		// Shared memory for PyTorch workers and NCCL, limited like /tmp.
		{Source: "shm", Destination: "/dev/shm", Device: "tmpfs", Flags: mountNoExec, Data: fmt.Sprintf("mode=1777,size=%d", size)},
		{Source: "sysfs", Destination: "/sys", Device: "sysfs", Flags: mountNoExec | unix.MS_RDONLY},
		// /tmp and /work allow exec: Triton and load_inline build shared
		// objects there. The work directory's files are copied up into its
		// tmpfs, so the run may change them without touching the host.
		{Source: "tmpfs", Destination: "/tmp", Device: "tmpfs", Flags: mountExec, Data: fmt.Sprintf("mode=1777,size=%d", size)},
	}
	if s.workBind != "" {
		c.Mounts = append(c.Mounts, &configs.Mount{Source: s.workBind, Destination: "/work", Device: "bind",
			Flags: unix.MS_BIND | unix.MS_NOSUID | unix.MS_NODEV})
	} else {
		c.Mounts = append(c.Mounts, &configs.Mount{Source: "tmpfs", Destination: "/work", Device: "tmpfs", Flags: mountExec,
			Data: fmt.Sprintf("mode=0755,%s,size=%d", owner, size), Extensions: configs.EXT_COPYUP})
	}
	for _, b := range s.Binds {
		dst := b.Destination
		if dst == "" {
			dst = b.Source
		}
		flags := unix.MS_BIND | unix.MS_REC | unix.MS_NOSUID | unix.MS_NODEV
		if !b.Writable {
			flags |= unix.MS_RDONLY
		}
		c.Mounts = append(c.Mounts, &configs.Mount{Source: b.Source, Destination: dst, Device: "bind", Flags: flags})
	}
	// runc's defaults: kernel interfaces that leak host state are masked or
	// read-only.
	ex := specconv.Example()
	c.MaskPaths = append(append([]string(nil), ex.Linux.MaskedPaths...), s.Mask...)
	c.ReadonlyPaths = append([]string(nil), ex.Linux.ReadonlyPaths...)
}

// baseDevices are the only device nodes a run gets besides those its spec
// passes in. Not specconv.AllowedDevices: that list also allows mknod of
// any device.
var baseDevices = []struct {
	path         string
	major, minor int64
}{
	{"/dev/null", 1, 3}, {"/dev/zero", 1, 5}, {"/dev/full", 1, 7},
	{"/dev/random", 1, 8}, {"/dev/urandom", 1, 9}, {"/dev/tty", 5, 0},
}

func configureDevices(c *configs.Config, s *Spec) {
	add := func(path string, typ devconfig.Type, major, minor int64) {
		// "rw" and never "m": a run reads and writes its nodes, it makes none.
		rule := devconfig.Rule{Type: typ, Major: major, Minor: minor, Permissions: "rw", Allow: true}
		c.Devices = append(c.Devices, &devconfig.Device{Rule: rule, Path: path, FileMode: 0o666})
	}
	for _, d := range baseDevices {
		add(d.path, devconfig.CharDevice, d.major, d.minor)
	}
	for _, d := range s.Devices {
		add(d.Path, devconfig.Type(d.Type), d.Major, d.Minor)
	}
}

func configureCgroups(c *configs.Config, id, parent string, l policies.Limits) {
	pids := l.Pids
	res := &cgroups.Resources{
		Memory: l.Memory,
		// Equal to Memory: no swap on top of it, so the limit is real.
		MemorySwap: l.Memory,
		PidsLimit:  &pids,
		CpusetCpus: l.Cpuset,
	}
	if l.CPUs > 0 {
		res.CpuPeriod = 100000
		res.CpuQuota = int64(l.CPUs * 100000)
	}
	// The device cgroup allows exactly the nodes created above and nothing
	// else: no wildcard rules, no mknod.
	for _, d := range c.Devices {
		r := d.Rule
		res.Devices = append(res.Devices, &r)
	}
	c.Cgroups = &cgroups.Cgroup{Path: filepath.Join("/", strings.Trim(parent, "/"), id), Resources: res}
}

func configureRlimits(c *configs.Config, l policies.Limits) {
	c.Rlimits = []configs.Rlimit{
		{Type: unix.RLIMIT_FSIZE, Hard: uint64(l.FileSize), Soft: uint64(l.FileSize)},
		{Type: unix.RLIMIT_NOFILE, Hard: l.OpenFiles, Soft: l.OpenFiles},
		// No core dumps: they would fill the tmpfs with the run's memory.
		{Type: unix.RLIMIT_CORE, Hard: 0, Soft: 0},
	}
}

func seccompConfig(p policies.SeccompProfile) *configs.Seccomp {
	errno := p.DefaultErrno
	s := &configs.Seccomp{
		DefaultAction:   configs.Errno,
		DefaultErrnoRet: &errno,
		// x86_64 only: 32-bit and x32 entry points find no rule.
		Architectures: []string{"amd64"},
	}
	for _, r := range p.Rules {
		for _, name := range r.Names {
			sc := &configs.Syscall{Name: name, Action: configs.Allow}
			if r.Action == policies.ActErrno {
				e := r.Errno
				sc.Action, sc.ErrnoRet = configs.Errno, &e
			}
			for _, a := range r.Args {
				arg := &configs.Arg{Index: a.Index, Value: a.Value, Op: configs.EqualTo}
				if a.Mask != 0 {
					arg = &configs.Arg{Index: a.Index, Value: a.Mask, ValueTwo: a.Value, Op: configs.MaskEqualTo}
				}
				sc.Args = append(sc.Args, arg)
			}
			s.Syscalls = append(s.Syscalls, sc)
		}
	}
	return s
}
