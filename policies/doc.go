// Package policies holds the rules a run is held to, as plain data: the
// resource limits per mode, the seccomp profile and the static scanner's
// rules. It is a leaf: it imports no other kernelbox package, and the
// sandbox translates its types into libcontainer's.
package policies
