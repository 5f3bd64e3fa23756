// Package policies holds the rules a run is held to, as plain data: the
// resource limits per mode and the seccomp profile. It is a leaf: it imports
// no other kernelbox package, and the sandbox translates its types into
// libcontainer's. (Rate limits, submission rules and the cheat scanner join
// it in later work.)
package policies
