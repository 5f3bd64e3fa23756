//go:build linux && !seccomp

package sandbox

// seccompBuilt is false without the seccomp build tag: libcontainer then
// cannot load a filter, and the sandbox refuses to run rather than run
// without one.
const seccompBuilt = false
