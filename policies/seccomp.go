package policies

// The seccomp profile, as data. An allowlist: every system call not named
// here fails with EPERM. The list follows the shape of Docker's default
// profile (what ordinary programs, Python, PyTorch and the CUDA driver use)
// and leaves out, on purpose, what a contestant has no business doing; see
// Refused for each with its reason.

// SeccompAction is what a rule does to a matching call.
type SeccompAction int

// Actions of a rule.
const (
	ActAllow SeccompAction = iota + 1
	ActErrno
)

// SeccompArg restricts a rule to calls whose argument Index satisfies
// (arg & Mask) == Value; a Mask of 0 means the whole argument.
type SeccompArg struct {
	Index uint
	Mask  uint64
	Value uint64
}

// SeccompRule is one rule: these calls, when every Arg matches, get Action.
type SeccompRule struct {
	Names  []string
	Action SeccompAction
	Errno  uint // for ActErrno
	Args   []SeccompArg
	Why    string
}

// SeccompProfile is a whole filter for x86_64 (the only architecture it
// admits, so 32-bit entry points are refused).
type SeccompProfile struct {
	DefaultErrno uint // errno for calls no rule allows
	Rules        []SeccompRule
}

// Errno values the profile uses (x86_64 Linux).
const (
	EPERM  = 1
	ENOSYS = 38
)

// Linux constants used in argument filters.
const (
	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16
	// CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET.
	cloneNamespaceFlags = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
)

// allowed are the calls every run may make without condition.
var allowed = []string{
	// files and descriptors
	"read", "write", "open", "openat", "openat2", "close", "close_range", "creat", "lseek", "pread64", "pwrite64",
	"readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2", "stat", "fstat", "lstat", "newfstatat", "statx",
	"access", "faccessat", "faccessat2", "dup", "dup2", "dup3", "pipe", "pipe2", "fcntl", "flock", "fsync",
	"fdatasync", "sync", "syncfs", "sync_file_range", "truncate", "ftruncate", "fallocate", "fadvise64", "readahead",
	"getdents", "getdents64", "getcwd", "chdir", "fchdir", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
	"rmdir", "link", "linkat", "unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat", "chmod",
	"fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask", "utime", "utimes",
	"utimensat", "futimesat", "mknod", "mknodat", "statfs", "fstatfs", "sendfile", "splice", "tee", "vmsplice",
	"copy_file_range", "ioctl", "setxattr", "lsetxattr", "fsetxattr", "getxattr", "lgetxattr", "fgetxattr",
	"listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr", "memfd_create",
	"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
	// polling and events
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
	"epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4", "timerfd_create",
	"timerfd_settime", "timerfd_gettime",
	// memory
	"brk", "mmap", "munmap", "mremap", "mprotect", "msync", "mincore", "madvise", "mlock", "mlock2", "munlock",
	"mlockall", "munlockall", "mbind", "get_mempolicy", "set_mempolicy", "set_mempolicy_home_node",
	"membarrier", "pkey_alloc", "pkey_free", "pkey_mprotect", "shmget", "shmat", "shmctl", "shmdt",
	// processes and threads
	"fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "kill", "tkill", "tgkill",
	"getpid", "getppid", "gettid", "set_tid_address", "set_robust_list", "get_robust_list", "futex", "futex_waitv",
	"rseq", "arch_prctl", "prctl", "seccomp", "setpgid", "getpgid", "getpgrp", "setsid", "getsid",
	"getpriority", "setpriority", "sched_yield", "sched_setparam", "sched_getparam", "sched_setscheduler",
	"sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
	"sched_setaffinity", "sched_getaffinity", "sched_setattr", "sched_getattr", "getcpu", "ioprio_get",
	"ioprio_set", "pidfd_open", "pidfd_send_signal", "restart_syscall",
	// signals
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigpending", "rt_sigtimedwait",
	"rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "pause",
	// identity (dropping privilege is fine; there is none to gain)
	"getuid", "getgid", "geteuid", "getegid", "getresuid", "getresgid", "getgroups", "setuid", "setgid",
	"setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups", "capget", "capset",
	// time and limits
	"time", "gettimeofday", "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "alarm",
	"getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
	"timer_delete", "getrlimit", "setrlimit", "prlimit64", "getrusage", "sysinfo", "times", "uname",
	"getrandom",
	// System V and POSIX IPC inside the run's own IPC namespace
	"semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink",
	"mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
	// asynchronous I/O (not io_uring)
	"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
	// sockets: the calls that act on a socket one already has; creating one
	// is restricted to AF_UNIX below.
	"connect", "accept", "accept4", "bind", "listen", "shutdown", "getsockname", "getpeername", "sendto",
	"recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "setsockopt", "getsockopt",
	// restricting oneself further is always allowed
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
}

// Refused names the calls left out of the allowlist on purpose, with the
// reason; a test checks that none of them slipped into it.
var Refused = map[string]string{
	"io_uring_setup":    "io_uring bypasses seccomp for the operations it carries out",
	"io_uring_enter":    "io_uring bypasses seccomp for the operations it carries out",
	"io_uring_register": "io_uring bypasses seccomp for the operations it carries out",
	"keyctl":            "the kernel keyring is shared with the host",
	"add_key":           "the kernel keyring is shared with the host",
	"request_key":       "the kernel keyring is shared with the host",
	"bpf":               "eBPF programs run in the kernel",
	"perf_event_open":   "performance counters reveal other processes and the kernel",
	"mount":             "no filesystem changes beyond what the sandbox mounted",
	"umount2":           "no filesystem changes beyond what the sandbox mounted",
	"pivot_root":        "no filesystem changes beyond what the sandbox mounted",
	"chroot":            "no filesystem changes beyond what the sandbox mounted",
	"fsopen":            "the new mount API is mount by another name",
	"fsmount":           "the new mount API is mount by another name",
	"fsconfig":          "the new mount API is mount by another name",
	"fspick":            "the new mount API is mount by another name",
	"move_mount":        "the new mount API is mount by another name",
	"open_tree":         "the new mount API is mount by another name",
	"mount_setattr":     "the new mount API is mount by another name",
	"unshare":           "new namespaces would let a run escape its limits",
	"setns":             "joining namespaces would let a run escape its sandbox",
	"ptrace":            "reading or steering other processes",
	"process_vm_readv":  "reading other processes' memory",
	"process_vm_writev": "writing other processes' memory",
	"pidfd_getfd":       "stealing other processes' descriptors",
	"kcmp":              "probing other processes' kernel objects",
	"kexec_load":        "replacing the running kernel",
	"kexec_file_load":   "replacing the running kernel",
	"reboot":            "the host is not the run's to stop",
	"swapon":            "the host's swap is not the run's",
	"swapoff":           "the host's swap is not the run's",
	"init_module":       "kernel modules",
	"finit_module":      "kernel modules",
	"delete_module":     "kernel modules",
	"acct":              "process accounting is host-wide",
	"settimeofday":      "the clock is host-wide",
	"clock_settime":     "the clock is host-wide",
	"clock_adjtime":     "the clock is host-wide",
	"adjtimex":          "the clock is host-wide",
	"iopl":              "raw port I/O",
	"ioperm":            "raw port I/O",
	"quotactl":          "disk quotas are host-wide",
	"open_by_handle_at": "opens files by handle, around the mount namespace",
	"name_to_handle_at": "pairs with open_by_handle_at",
	"userfaultfd":       "a classic aid to kernel exploits",
	"syslog":            "the kernel log is the host's",
	"vhangup":           "terminal control is the host's",
	"personality":       "changes the syscall ABI",
	"uselib":            "obsolete",
	"ustat":             "obsolete",
	"sysfs":             "obsolete",
	"_sysctl":           "obsolete",
	"nfsservctl":        "obsolete",
	"lookup_dcookie":    "kernel profiling",
	"fanotify_init":     "watches the whole filesystem",
	"process_madvise":   "acts on other processes' memory",
	"socket":            "allowed for AF_UNIX only (see the conditional rules)",
	"socketpair":        "allowed for AF_UNIX only (see the conditional rules)",
	"clone":             "allowed without namespace flags only (see the conditional rules)",
	"clone3":            "answers ENOSYS so that libc falls back to clone, whose flags the filter can read",
}

// LoopbackSeccomp is DefaultSeccomp for a run whose processes talk over
// TCP (the ranks of a multi-GPU problem: gloo's transport, NCCL's
// bootstrap): it may also create IPv4, IPv6 and netlink sockets, which
// within its network namespace reach only its own loopback. Netlink is
// there because finding the loopback's address (getifaddrs) asks the kernel
// through it; changing an interface needs a capability the run lacks.
func LoopbackSeccomp() SeccompProfile {
	p := DefaultSeccomp()
	for _, fam := range []uint64{afInet, afInet6, afNetlink} {
		p.Rules = append(p.Rules, SeccompRule{Names: []string{"socket"}, Action: ActAllow, Args: []SeccompArg{{Index: 0, Value: fam}},
			Why: "the ranks' sockets, on the run's own loopback only"})
	}
	return p
}

// DefaultSeccomp is the profile every sandboxed run gets.
func DefaultSeccomp() SeccompProfile {
	return SeccompProfile{
		DefaultErrno: EPERM,
		Rules: []SeccompRule{
			{Names: append([]string(nil), allowed...), Action: ActAllow, Why: "ordinary programs"},
			{Names: []string{"socket", "socketpair"}, Action: ActAllow, Args: []SeccompArg{{Index: 0, Value: afUnix}},
				Why: "local sockets only: no network family exists for a run"},
			{Names: []string{"clone"}, Action: ActAllow, Args: []SeccompArg{{Index: 0, Mask: cloneNamespaceFlags, Value: 0}},
				Why: "threads and processes, but no new namespaces"},
			{Names: []string{"clone3"}, Action: ActErrno, Errno: ENOSYS,
				Why: "clone3 passes its flags in memory, which seccomp cannot read"},
		},
	}
}
