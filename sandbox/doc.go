// Package sandbox will run one evaluation in one libcontainer container
// (seccomp, no network, cgroup limits); its libcontainer init hook will be
// the codebase's only init(). It imports only the leaf packages. Not
// implemented yet: the sandbox issue builds it, behind problems.Launcher.
package sandbox
