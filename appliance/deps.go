package appliance

import (
	"context"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/problems"
	"kernelbox/queue"
	"kernelbox/sandbox"
)

// The interfaces the daemon consumes, in one place, each with the check
// that the real part satisfies it. Tests put fakes in their place:
// sandboxtest.Runtime for the sandbox, gputest's NVML under gpu.Monitor.

// SandboxRunner runs one spec in a fresh sandbox: a *sandbox.Runtime, or a
// sandboxtest.Runtime in tests.
type SandboxRunner interface {
	Run(ctx context.Context, s sandbox.Spec) (*sandbox.Result, error)
}

// jobQueue is what the runner does with the queue: claim, hold, end jobs.
type jobQueue interface {
	Claim(ctx context.Context, r queue.ClaimRequest) (*queue.Lease, error)
	Start(ctx context.Context, l *queue.Lease) error
	Heartbeat(ctx context.Context, l *queue.Lease, ttl time.Duration) error
	Finish(ctx context.Context, l *queue.Lease, st queue.State, gpuTime time.Duration, errText string) error
	Retry(ctx context.Context, l *queue.Lease, delay time.Duration, errText string) (bool, error)
	Release(ctx context.Context, l *queue.Lease, why string) error
	Reap(ctx context.Context, boot string) (int, error)
}

// runStore is what the runner does with the store: a run's life, and the
// progress it logs.
type runStore interface {
	StartRun(ctx context.Context, runID int64, lease, gpuID string) (bool, error)
	LoadRun(ctx context.Context, runID int64) (*store.RunContext, error)
	FinishRun(ctx context.Context, runID int64, lease string, res store.RunResult) (*store.Submission, error)
	AppendEvent(ctx context.Context, subID int64, data api.Payload) error
	DeletedSubmission(ctx context.Context, subID int64) (bool, error)
	Drains(ctx context.Context) (map[string]string, error)
	SetDrain(ctx context.Context, slot, why string) error
}

// gpuMonitor is what the runner reads of a GPU: gpu.Monitor over NVML or
// sysfs.
type gpuMonitor interface {
	Read(uuid string) (gpu.Telemetry, error)
	Health(uuid string) ([]string, error)
	Gate(ctx context.Context, uuid string, cfg gpu.GateConfig) (gpu.Telemetry, error)
	Sample(uuid string, every time.Duration, mask uint64) *gpu.Sampler
}

var (
	_ SandboxRunner     = (*sandbox.Runtime)(nil)
	_ jobQueue          = (*queue.Store)(nil)
	_ runStore          = (*store.Store)(nil)
	_ gpuMonitor        = (*gpu.Monitor)(nil)
	_ problems.Launcher = (*sandboxLauncher)(nil)
)
