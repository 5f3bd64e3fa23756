package runner

import (
	"context"
	"log/slog"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/problems"
	"kernelbox/queue"
)

// The interfaces the runner consumes, declared here where they are used
// (docs/architecture.md, rule 3), each with the check that the real part satisfies
// it. Tests put fakes in their place: sandboxtest.Runtime under the
// launcher, gputest's NVML under gpu.Monitor.

// Queue is what the runner does with the queue: claim, hold, end jobs.
type Queue interface {
	Claim(ctx context.Context, r queue.ClaimRequest) (*queue.Lease, error)
	Start(ctx context.Context, l *queue.Lease) error
	Heartbeat(ctx context.Context, l *queue.Lease, ttl time.Duration) error
	Finish(ctx context.Context, l *queue.Lease, st queue.State, gpuTime time.Duration, errText string) error
	Retry(ctx context.Context, l *queue.Lease, delay time.Duration, errText string) (bool, error)
	Release(ctx context.Context, l *queue.Lease, why string) error
	Reap(ctx context.Context, boot string) (int, error)
}

// Store is what the runner does with the daemon's store: a run's life,
// the progress it logs, and the slots' drains.
type Store interface {
	StartRun(ctx context.Context, runID int64, lease, gpuID string) (bool, error)
	LoadRun(ctx context.Context, runID int64) (*store.RunContext, error)
	FinishRun(ctx context.Context, runID int64, lease string, res store.RunResult) (*store.Submission, error)
	AppendEvent(ctx context.Context, subID int64, data api.Payload) error
	DeletedSubmission(ctx context.Context, subID int64) (bool, error)
	Drains(ctx context.Context) (map[string]string, error)
	SetDrain(ctx context.Context, slot, why string) error
}

// Monitor is what the runner reads of a GPU: gpu.Monitor over NVML or
// sysfs.
type Monitor interface {
	Read(uuid string) (gpu.Telemetry, error)
	Health(uuid string) ([]string, error)
	Gate(ctx context.Context, uuid string, cfg gpu.GateConfig) (gpu.Telemetry, error)
	Sample(uuid string, every time.Duration, mask uint64) *gpu.Sampler
}

// Wake is the daemon's wake-up: fired when jobs are enqueued, and by the
// runner when slots come free. Wait's channel closes at the next Fire.
type Wake interface {
	Wait() <-chan struct{}
	Fire()
}

// Metrics counts what the runner did, for /metrics.
type Metrics interface {
	// Run counts a run's end: outcome is passed, failed, box_error or
	// throttled.
	Run(gpuType, mode, outcome string, wall time.Duration)
	Canary(c api.Canary)
}

// LaunchFunc gives the launcher and base environment for one run on a
// gang: the sandbox with its device nodes, in the daemon.
type LaunchFunc func(g Gang, mode problems.Mode) (problems.Launcher, []string)

// Deps is everything a runner is built from. New takes it whole: nothing
// of a runner is set after New.
type Deps struct {
	Config Config
	// Slots are the slots the runner hands jobs to; none keeps every job
	// queued (a box that cannot evaluate).
	Slots []Slot
	Queue Queue
	// Store is nil on a Slurm node, which runs one job that EventsFunc
	// reports on.
	Store   Store
	Wake    Wake // nil: nobody to wake (a node's single run)
	Metrics Metrics
	// TasksFunc loads a leaderboard's problem; ReconcileFunc ends the runs
	// whose job the queue gave up on.
	TasksFunc     func(*store.Leaderboard) (*problems.Task, error)
	ReconcileFunc func(context.Context) error
	// EventsFunc, when set, takes a run's progress events instead of the
	// store: on a Slurm node, which has none, they go to the coordinator.
	EventsFunc func(ctx context.Context, subID int64, p api.Payload) error
	Launch     LaunchFunc
	// Python is the harness interpreter.
	Python *problems.Interpreter
	// Monitor, when set, gates, samples and judges runs on GPU slots.
	Monitor Monitor
	// Profiler, when set, runs profile mode on GPU slots under ncu.
	Profiler *problems.Profiler
	// Executor carries the runs out elsewhere (a Slurm cluster's nodes);
	// nil for this box's own slots, which the runner runs itself: its warm
	// starts, standbys and canaries need the slots' state it keeps.
	Executor Executor
	// Canaries holds each GPU type's canary; nil for none.
	Canaries *Canaries
	// JobDoneFunc, when set, is called each time a gang is free again:
	// tests and the idle-gap benchmark listen here.
	JobDoneFunc func()
	Log         *slog.Logger
}

// Config is the runner's part of the daemon's configuration.
type Config struct {
	Boot                             string // this daemon's boot id: leases of other boots are orphans
	LeaseTTL                         time.Duration
	MaxRunningPerUser, BackfillLimit int
	AgePerSecond                     int64
	// WarmStart claims the next job of a busy GPU and starts its sandbox
	// before the GPU is free (warm.go).
	WarmStart bool
	// Standby keeps a harness waiting on each idle GPU (standby.go).
	Standby bool
	Version string // the binary's, stored with every run
	// WorkRoot holds the runs' work directories.
	WorkRoot string
	// ProfilesDir is where kept .ncu-rep files go; the reports kept are
	// at most MaxReport bytes.
	ProfilesDir string
	MaxReport   int64
	// CacheDir holds the users' compile caches, CacheBudget bytes each;
	// a budget of 0 turns them off (cache.go).
	CacheDir    string
	CacheBudget int64
	// Sandbox says whether this machine's runs go into the sandbox: their
	// isolation, stored with each (isolation.go).
	Sandbox bool
	// UnrankUnsandboxed keeps out of the rankings a run that went without
	// the sandbox: a coordinator's, unless slurm.rank_unsandboxed.
	UnrankUnsandboxed bool
	Measure           MeasureConfig
	Driver            string // the GPU driver's version, stored with every run
	// IdlePoll bounds how long an idle slot sleeps without a wake-up: a
	// retried job becomes ready after its delay, and nobody fires for
	// that. 0 is a second.
	IdlePoll time.Duration
}

var (
	_ Queue   = (*queue.Store)(nil)
	_ Store   = (*store.Store)(nil)
	_ Monitor = (*gpu.Monitor)(nil)
)

// nopWake stands in for a missing Wake.
type nopWake struct{}

func (nopWake) Wait() <-chan struct{} { return nil }
func (nopWake) Fire()                 {}

// nopMetrics stands in for missing Metrics.
type nopMetrics struct{}

func (nopMetrics) Run(string, string, string, time.Duration) {}
func (nopMetrics) Canary(api.Canary)                         {}
