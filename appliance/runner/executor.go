package runner

import (
	"context"
	"time"

	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/problems"
)

// An Executor carries out one run on a gang of slots and returns what it
// left: the harness's report and the GPUs' readings. The runner around it
// owns the rest of a job's life (the lease and its heartbeat, judging the
// execution, recording the result), so every executor's runs are judged
// and stored alike.
//
// The runner itself is the executor of this box's own slots: it runs the
// harness in this box's sandbox on the gang's own GPUs (or CPUs). The
// slurm executor (appliance/slurm.go) has a node of a Slurm cluster do the
// same with `kernelbox node run-job`, and waits for its report. A
// Kubernetes executor would fit the same place: a Job per run, its Pod
// running `kernelbox node run-job` (docs/scale-out.md).
//
// Execute returns an error for the box's failures only (the run is tried
// again); ctx ends when the lease is lost or the daemon stops, and the
// execution must then stop. take, when set, is a warm start's wait for
// its slot (warm.go); only the local executor starts runs warm.
type Executor interface {
	Execute(ctx context.Context, g Gang, rc *store.RunContext, take func(context.Context) error) (*Execution, error)
}

// Execution is what a run left: the harness's report and the GPUs'
// readings around it.
type Execution struct {
	Report *problems.Report
	// Profile is the kept Nsight Compute report's name in ProfilesDir.
	Profile string
	Wall    time.Duration
	// Timed runs (not test mode, on a measured GPU) are gated and must not
	// throttle.
	Timed bool
	// Before is the lead GPU's reading at the gate; Tel its telemetry
	// across the run, Others a gang's other GPUs', Throttled the first
	// that throttled.
	Before    *gpu.Telemetry
	Tel       *gpu.RunTelemetry
	Others    []gpu.RunTelemetry
	Throttled *gpu.RunTelemetry
	// Info is what the machine that ran it says of itself (a Slurm node's
	// host, Python, GPU); nil for this box's own slots.
	Info map[string]any
}

// Remoter is an executor that sends runs away, and says where each slot's
// run is (`kernelbox gpus` shows it).
type Remoter interface {
	Remote(slot string) string
}

var _ Executor = (*Runner)(nil)
