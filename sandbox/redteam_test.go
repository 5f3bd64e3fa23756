//go:build linux

package sandbox

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The red-team suite: hostile programs, each with what it must see. Each
// prints "BLOCKED" when the sandbox stopped it and "ESCAPED ..." when not.
func TestRedTeam(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t)
	hostPort := hostListener(t)

	syscallProbe := func(nr int, args string) string {
		return py(`import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(` + itoa(nr) + args + `)
print("BLOCKED" if r == -1 and ctypes.get_errno() in (1, 38) else "ESCAPED %d errno %d" % (r, ctypes.get_errno()))`)
	}
	tests := []struct {
		name, script string
	}{
		{"tcp to a host listener", dialHost(hostPort)},
		{"udp socket", py(`import socket
try: socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print("ESCAPED")
except OSError: print("BLOCKED")`)},
		{"ipv6 socket", py(`import socket
try: socket.socket(socket.AF_INET6, socket.SOCK_STREAM); print("ESCAPED")
except OSError: print("BLOCKED")`)},
		{"raw packet socket", py(`import socket
try: socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print("ESCAPED")
except OSError: print("BLOCKED")`)},
		{"vsock", py(`import socket
try: socket.socket(40, socket.SOCK_STREAM); print("ESCAPED")
except OSError: print("BLOCKED")`)},
		{"netlink", py(`import socket
try: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW); print("ESCAPED")
except OSError: print("BLOCKED")`)},
		{"dns lookup", py(`import socket
try: socket.getaddrinfo("example.com", 80); print("ESCAPED")
except OSError: print("BLOCKED")`)},
		{"listening tcp server", py(`import socket
try:
    s = socket.socket(); s.bind(("0.0.0.0", 8022)); s.listen(); print("ESCAPED")
except OSError: print("BLOCKED")`)},
		{"pip install", `python3 -m pip install --no-cache-dir --timeout 3 requests >/dev/null 2>&1 && echo ESCAPED || echo BLOCKED`},
		{"io_uring_setup", syscallProbe(425, ", 8, ctypes.create_string_buffer(120)")},
		{"keyctl", syscallProbe(250, ", 0, 0")},
		{"add_key", syscallProbe(248, ", b\"user\", b\"k\", b\"v\", 1, -3")},
		{"bpf", syscallProbe(321, ", 0, 0, 0")},
		{"perf_event_open", syscallProbe(298, ", ctypes.create_string_buffer(128), 0, -1, -1, 0")},
		{"ptrace attach", syscallProbe(101, ", 16, 1, 0, 0")},
		{"process_vm_readv", syscallProbe(310, ", 1, 0, 0, 0, 0, 0")},
		{"unshare user namespace", `unshare -U true 2>/dev/null && echo ESCAPED || echo BLOCKED`},
		{"unshare mount namespace", syscallProbe(272, ", 0x00020000")},
		{"clone with new namespace", syscallProbe(56, ", 0x10000000 | 17, 0, 0, 0, 0")},
		{"mount tmpfs", syscallProbe(165, ", b\"none\", b\"/tmp\", b\"tmpfs\", 0, 0")},
		{"reboot", syscallProbe(169, ", 0xfee1dead, 672274793, 0x1234567, 0")},
		{"setns", syscallProbe(308, ", 0, 0")},
		{"kexec_load", syscallProbe(246, ", 0, 0, 0, 0")},
		{"write outside tmp", `echo x > /etc/owned 2>/dev/null && echo ESCAPED || echo BLOCKED`},
		{"write to usr", `echo x > /usr/owned 2>/dev/null && echo ESCAPED || echo BLOCKED`},
		{"write /proc/self/exe", py(`try:
    open("/proc/self/exe", "wb").write(b"x"); print("ESCAPED")
except OSError: print("BLOCKED")`)},
		{"setuid binary gains nothing", `su -c 'id -u' root </dev/null >/dev/null 2>&1 && echo ESCAPED || echo BLOCKED`},
		{"no host devices", `ls /dev | grep -qE 'sd|vd|nvme|mem|kmsg|nvidia' && echo ESCAPED || echo BLOCKED`},
		{"mknod a disk", `mknod /tmp/disk b 8 0 2>/dev/null && echo ESCAPED || echo BLOCKED`},
		{"host processes invisible", py(`import os
mine = [p for p in os.listdir("/proc") if p.isdigit()]
seen = [open("/proc/%s/cmdline" % p, "rb").read() for p in mine]
print("ESCAPED %s" % seen if len(mine) > 5 or any(b"sandbox" + b".test" in c for c in seen) else "BLOCKED")`)},
		{"fd leak probe", py(`import os
fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
print("BLOCKED" if fds[:4] == [0, 1, 2, 3] and len(fds) <= 5 else "ESCAPED %s" % fds)`)},
		{"no capabilities", `grep -q '^CapEff:\s*0000000000000000' /proc/self/status && grep -q '^NoNewPrivs:\s*1' /proc/self/status && echo BLOCKED || echo ESCAPED`},
		{"seccomp is on", `grep -q '^Seccomp:\s*2' /proc/self/status && echo BLOCKED || echo ESCAPED`},
		{"32-bit syscall entry", py(int80Probe)},
		{"fork bomb is contained", `sh -c 'i=0; while [ $i -lt 500 ]; do sleep 2 & i=$((i+1)); done; echo ESCAPED' 2>/dev/null; echo BLOCKED`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.name == "32-bit syscall entry" {
				requireIA32(t)
			}
			requireBlocked(t, r, shSpec(tt.script))
		})
	}
}

// int80Probe makes an i386 getpid through int 0x80 from a 64-bit process.
const int80Probe = `import ctypes, mmap
code = bytes([0xb8, 0x14, 0, 0, 0, 0xcd, 0x80, 0xc3])  # mov eax, 20 (i386 getpid); int 0x80; ret
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
fn = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
r = fn()
print("BLOCKED" if r < 0 else "ESCAPED getpid=%d" % r)`

// requireIA32 skips a 32-bit-entry probe on a kernel that has no such
// entry (ia32 emulation off: int 0x80 faults on the host itself, so the
// sandbox has nothing to block).
func requireIA32(t *testing.T) {
	t.Helper()
	err := exec.Command("python3", "-c", int80Probe).Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Skipf("this kernel has no 32-bit system call entry (int 0x80 kills a process on the host with %v): nothing to block", ws.Signal())
		}
	}
}

// py runs code with python3 in the sandbox's shell.
func py(code string) string { return "exec python3 -c '" + code + "'" }

// hostListener listens on the host's loopback, answering "host" to every
// connection, for the life of the test: a run must not reach it. It
// returns the port.
func hostListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host\n"))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// dialHost is a probe that connects to the host's listener on port.
func dialHost(port int) string {
	return py(`import socket
try:
    s = socket.create_connection(("127.0.0.1", ` + itoa(port) + `), timeout=2); print("ESCAPED", s.recv(10))
except OSError as e: print("BLOCKED", e)`)
}

// requireBlocked runs a probe that prints BLOCKED or ESCAPED and fails
// unless it was blocked.
func requireBlocked(t *testing.T, r *Runtime, s Spec) {
	t.Helper()
	s.Limits.Pids = 64
	s.Limits.WallTime = 15 * time.Second
	s.ResultPipe = true
	res, err := r.Run(t.Context(), s)
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	requireHostClean(t, r, res.ID)
	// A sandbox error is an infrastructure failure (the daemon retries
	// those), not a verdict on the program: seen once in CI without its
	// cause, so log it and run once more rather than flake.
	if res.Verdict == VerdictSandboxErr {
		t.Logf("sandbox error, retrying once: %s", res.Error)
		if res, err = r.Run(t.Context(), s); err != nil {
			t.Fatalf("Run() = %v", err)
		}
		requireHostClean(t, r, res.ID)
	}
	out := strings.TrimSpace(string(res.Stdout))
	if res.Signal == "SIGSYS" {
		return // seccomp killed it: as blocked as it gets
	}
	// ESCAPED anywhere fails, not only on the last line: the fork
	// bomb's inner shell says so before the outer one goes on.
	if !strings.HasPrefix(lastLine(out), "BLOCKED") || strings.Contains(out, "ESCAPED") {
		t.Errorf("verdict %s (%s), stdout %q, stderr %q: want BLOCKED", res.Verdict, res.Error, out, truncate(res.Stderr))
	}
}

// TestRedTeam_Loopback: a run that may open IP sockets (the ranks of a
// multi-GPU problem) talks to itself over its own loopback and to nothing
// else: the host's loopback listener is out of reach, and its namespace
// has no other interface and no route. (No probe sends to an outside
// address: were the sandbox to leak, that traffic would leave the box.)
func TestRedTeam_Loopback(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t)
	hostPort := hostListener(t)
	tests := []struct {
		name, script string
	}{
		{"the host's loopback listener", dialHost(hostPort)},
		{"only loopback", py(`import socket
names = [n for _, n in socket.if_nameindex()]
print("BLOCKED" if names == ["lo"] else "ESCAPED %s" % names)`)},
		{"no route", py(`rows = open("/proc/net/route").read().splitlines()[1:]
rows6 = [r for r in open("/proc/net/ipv6_route").read().splitlines() if not r.rstrip().endswith("lo")]
print("BLOCKED" if not rows and not rows6 else "ESCAPED %s %s" % (rows, rows6))`)},
		{"raw packet socket", py(`import socket
try: socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print("ESCAPED")
except OSError: print("BLOCKED")`)},
		{"bring up an interface", `command -v ip >/dev/null || { echo "ESCAPED? no ip command to probe with"; exit; }; ip link add dummy0 type dummy 2>/dev/null && echo ESCAPED || echo BLOCKED`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := shSpec(tt.script)
			s.Loopback = true
			requireBlocked(t, r, s)
		})
	}
	t.Run("ranks talk over loopback", func(t *testing.T) {
		t.Parallel()
		s := shSpec(py(`import socket, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
def serve():
    c, _ = srv.accept(); c.sendall(b"rank0"); c.close()
threading.Thread(target=serve).start()
s = socket.create_connection(srv.getsockname(), timeout=5)
print(s.recv(10).decode())`))
		s.Loopback = true
		s.Limits.WallTime = 15 * time.Second
		s.ResultPipe = true
		res, err := r.Run(t.Context(), s)
		if err != nil {
			t.Fatalf("Run() = %v", err)
		}
		requireHostClean(t, r, res.ID)
		if got := strings.TrimSpace(string(res.Stdout)); got != "rank0" {
			t.Errorf("verdict %s, stdout %q, stderr %q: want rank0", res.Verdict, got, truncate(res.Stderr))
		}
	})
}

// TestRuntime_NothingCarriesOver: a run sees neither what an earlier run
// left in its scratch space nor host files that were not bound (the
// daemon's database, other users' submissions).
func TestRuntime_NothingCarriesOver(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t)
	secret := filepath.Join(t.TempDir(), "kernelbox.db")
	if err := os.WriteFile(secret, []byte("users"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := r.Run(t.Context(), shSpec("echo left > /tmp/left; echo left > /work/left; echo left > /dev/shm/left"))
	if err != nil || first.Verdict != VerdictOK {
		t.Fatalf("first run: %+v, %v", first, err)
	}
	second, err := r.Run(t.Context(), shSpec("cat /tmp/left /work/left /dev/shm/left "+secret+" 2>/dev/null && echo ESCAPED || echo BLOCKED"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(second.Stdout)); got != "BLOCKED" {
		t.Errorf("second run printed %q, want BLOCKED", got)
	}
}

// TestRuntime_LeavesNothing: after a run, its cgroup, state and run
// directory are gone, and a process it left cannot survive.
func TestRuntime_LeavesNothing(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t)
	// An odd duration: the check below looks through every process of
	// the host, and an operator's `sleep 300` is not the run's.
	s := shSpec(`(setsid sh -c 'sleep 300.0417' &) ; echo started`)
	res, err := r.Run(t.Context(), s)
	if err != nil || res.Verdict != VerdictOK {
		t.Fatalf("Run() = %+v, %v", res, err)
	}
	requireHostClean(t, r, res.ID)
	for _, d := range []string{"state", "runs"} {
		entries, _ := os.ReadDir(filepath.Join(r.root, d))
		if len(entries) != 0 {
			t.Errorf("%s holds %d entries after the run", d, len(entries))
		}
	}
	if pids := findProcs("sleep 300.0417"); len(pids) > 0 {
		t.Errorf("a process of the run survived: %v", pids)
	}
}

func findProcs(cmdline string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), cmdline) {
			found = append(found, e.Name())
		}
	}
	return found
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestRedTeam_Native compiles the C programs of testdata/redteam on the
// host and runs each in the sandbox; each must print BLOCKED (or die of
// SIGSYS, seccomp's kill).
func TestRedTeam_Native(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t)
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc (packaging/setup.sh installs it)")
	}
	sources, _ := filepath.Glob(filepath.Join("testdata", "redteam", "*.c"))
	if len(sources) < 6 {
		t.Fatalf("found %d C programs in testdata/redteam", len(sources))
	}
	for _, src := range sources {
		name := strings.TrimSuffix(filepath.Base(src), ".c")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "int80" {
				requireIA32(t)
			}
			work := t.TempDir()
			if out, err := exec.Command(cc, "-O1", "-o", filepath.Join(work, "prog"), src).CombinedOutput(); err != nil {
				t.Fatalf("gcc %s: %v\n%s", src, err, out)
			}
			s := shSpec("exec ./prog")
			s.WorkDir = work
			s.Limits.Pids = 64
			res, err := r.Run(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			requireHostClean(t, r, res.ID)
			if res.Signal == "SIGSYS" {
				return
			}
			if out := strings.TrimSpace(string(res.Stdout)); !strings.HasPrefix(out, "BLOCKED") {
				t.Errorf("%s: verdict %s, stdout %q, stderr %q: want BLOCKED", name, res.Verdict, out, truncate(res.Stderr))
			}
		})
	}
}
