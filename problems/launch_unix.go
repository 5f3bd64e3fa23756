//go:build unix

package problems

import (
	"os"
	"syscall"
)

// groupAttr starts the harness in a process group of its own, so that
// killGroup reaches everything it and the submission started.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func killGroup(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }

// Flags for the nvcc cache: a planted link or FIFO is refused, not followed
// or waited on.
const (
	noFollow         = syscall.O_NOFOLLOW
	noFollowNonBlock = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
)
