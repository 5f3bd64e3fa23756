//go:build linux && seccomp

package sandbox

// seccompBuilt: this binary can load seccomp filters (cgo, libseccomp and
// the seccomp build tag).
const seccompBuilt = true
