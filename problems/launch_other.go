//go:build !unix

package problems

import (
	"os"
	"syscall"
)

// Without Unix process groups the harness is killed alone. In practice
// ExecLauncher does not start there at all: the harness's result stream
// is an inherited descriptor (fd 3), which Windows does not pass on, so
// `kernelbox eval` says it needs Linux or macOS before it gets here.
func groupAttr() *syscall.SysProcAttr { return nil }

func killGroup(p *os.Process) error { return p.Kill() }

// The nvcc cache only runs where nvcc does; elsewhere os.Root's own checks
// are all there is.
const (
	noFollow         = 0
	noFollowNonBlock = 0
)
