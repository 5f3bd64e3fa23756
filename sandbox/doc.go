// Package sandbox runs one command in one libcontainer container: an empty
// read-only root with read-only binds of the runtime, fresh size-limited
// tmpfs for /tmp and the work directory, new mount, PID, IPC, UTS, network
// (loopback only) and cgroup namespaces, uid 65534 without capabilities and
// with no_new_privs, a seccomp allowlist, a minimal device list, cgroup
// limits and a wall-clock limit. It imports only the leaf package policies;
// its libcontainer init hook (init.go) is the codebase's only init().
package sandbox
