// Package policies will hold the limits per mode, the seccomp profile, rate
// limits, submission rules and the cheat scanner. It is a leaf: it imports
// no other kernelbox package. Not implemented yet: the sandbox and
// integrity issues fill it.
package policies
