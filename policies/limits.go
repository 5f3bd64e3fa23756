package policies

import (
	"fmt"
	"time"
)

// Limits bound one sandboxed run.
type Limits struct {
	Memory      int64         // bytes of memory (and no swap on top)
	Pids        int64         // processes and threads
	CPUs        float64       // CPU quota in cores; 0 means no quota
	Cpuset      string        // CPUs the run may use ("0-3"); empty means all
	TmpSize     int64         // bytes of each tmpfs (/tmp, the work directory, /dev/shm)
	WallTime    time.Duration // the whole process tree is killed after this
	OutputBytes int           // per stream (stdout, stderr, the result pipe)
	FileSize    int64         // RLIMIT_FSIZE: the largest file a process may write
	OpenFiles   uint64        // RLIMIT_NOFILE
}

// Validate reports the first limit that makes no sense.
func (l Limits) Validate() error {
	switch {
	case l.Memory < 16<<20:
		return fmt.Errorf("limits: memory %d bytes is below 16 MiB", l.Memory)
	case l.Pids < 1:
		return fmt.Errorf("limits: pids %d must be positive", l.Pids)
	case l.CPUs < 0:
		return fmt.Errorf("limits: cpus %g must not be negative", l.CPUs)
	case l.TmpSize < 1<<20:
		return fmt.Errorf("limits: tmpfs size %d bytes is below 1 MiB", l.TmpSize)
	case l.WallTime <= 0:
		return fmt.Errorf("limits: wall time %v must be positive", l.WallTime)
	case l.OutputBytes < 1024:
		return fmt.Errorf("limits: output cap %d bytes is below 1 KiB", l.OutputBytes)
	case l.FileSize < 1<<20:
		return fmt.Errorf("limits: file size %d bytes is below 1 MiB", l.FileSize)
	case l.OpenFiles < 64:
		return fmt.Errorf("limits: open files %d is below 64", l.OpenFiles)
	}
	return nil
}

// DefaultLimits are what a run gets when its mode asks for nothing else:
// room for PyTorch and a CUDA context, not for the host.
func DefaultLimits() Limits {
	return Limits{
		Memory:      8 << 30,
		Pids:        512,
		CPUs:        4,
		TmpSize:     2 << 30,
		WallTime:    5 * time.Minute,
		OutputBytes: 1 << 20,
		FileSize:    1 << 30,
		OpenFiles:   4096,
	}
}

// ForMode returns the limits of a harness mode. The wall time comes from
// the problem (its timeouts), so only what differs per mode is here:
// profile mode runs ncu, which needs more memory (a 512 MiB limit killed
// `ncu --set full` around PyTorch on the H200 machine).
func ForMode(mode string, wall time.Duration) Limits {
	l := DefaultLimits()
	if wall > 0 {
		l.WallTime = wall
	}
	if mode == "profile" {
		l.Memory = 16 << 30
	}
	return l
}
