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
