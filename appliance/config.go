package appliance

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

// ErrConfig marks every configuration error.
var ErrConfig = errors.New("bad configuration")

// ConfigError names the field that is wrong.
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("config %s: %s", e.Field, e.Msg) }

// Unwrap makes every ConfigError match ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// Config is the daemon's configuration: DefaultConfig, then the config
// file, then flags.
type Config struct {
	// Version is the binary's, reported by the health endpoint and stored
	// with every run; the command line sets it, no file does.
	Version string `yaml:"-"`
	// DataDir holds the databases, loaded problems, the admin token and the
	// unix socket.
	DataDir string `yaml:"data"`
	// Listen is the TCP address of the API; empty for none (socket only).
	Listen string `yaml:"listen"`
	// Socket is the unix socket for local administration; DataDir/kernelbox.sock when empty.
	Socket string `yaml:"socket"`
	// Python is the harness interpreter; the first python3 that imports
	// torch when empty.
	Python string `yaml:"python"`
	// GPUs is auto (discover them: NVIDIA through NVML, AMD through sysfs)
	// or none (serve only the CPU backend).
	GPUs string `yaml:"gpus"`
	// GPUAliases rename GPU types for leaderboards: a driver name or a
	// derived type maps to the name used ("NVIDIA H100 80GB HBM3": H100-SXM).
	GPUAliases map[string]string `yaml:"gpu_aliases"`
	// Measurement is how timed runs on GPUs are made fair.
	Measurement runner.MeasureConfig `yaml:"measurement"`
	// CPUSlots is how many CPU-backend runs go at once (the "cpu" GPU type);
	// 0 offers no CPU backend.
	CPUSlots int `yaml:"cpu_slots"`
	// Sandbox runs every harness in the sandbox. Turning it off runs
	// submissions as the daemon's user: for development on a machine where
	// the daemon cannot be root, never for contestants' code.
	Sandbox bool `yaml:"sandbox"`
	// Library loads the bundled problems at start.
	Library bool `yaml:"library"`
	// Grace is how long a shutdown waits for running jobs before it stops
	// them and gives them back to the queue.
	Grace time.Duration `yaml:"grace"`
	// LeaseTTL is how long a job's lease lasts between heartbeats; a
	// crashed daemon's jobs go back to the queue after it.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// MaxQueuedPerUser caps the jobs one user may have waiting.
	MaxQueuedPerUser int `yaml:"max_queued_per_user"`
	// MaxRunningPerUser caps the GPU slots one user holds at once.
	MaxRunningPerUser int `yaml:"max_running_per_user"`
	// BackfillLimit is how many jobs may start ahead of a multi-GPU job
	// that heads the queue and waits for enough GPUs; then the free GPUs
	// are held for it.
	BackfillLimit int `yaml:"backfill_limit"`
	// AgePerSecond is the fair-share credit of waiting, in GPU-milliseconds
	// per second: a heavy user's job is not starved by light users.
	AgePerSecond int64 `yaml:"age_per_second"`
	// WarmStart lets a busy GPU's next one-GPU job start its sandbox and
	// prepare (torch imported, workers started) before the GPU is free,
	// touching the GPU only once it is (appliance/warm.go).
	WarmStart bool `yaml:"warm_start"`
	// Standby keeps a harness waiting on each idle GPU, torch imported and
	// nothing run, which the next run on our Python harness takes over
	// (appliance/standby.go): a test run skips its cold start. It costs
	// two idle Python processes per GPU (about 1 GB of memory).
	Standby bool `yaml:"standby"`
	// Canary is how often each GPU type evaluates a tiny bundled problem
	// through the contestants' path (canary.go), and at start; /readyz is
	// not ready while the last one failed. 0 turns it off.
	Canary time.Duration `yaml:"canary"`
	// AcceptStoreLoss lets the daemon start on a database that lost what
	// the data directory recorded of it (datadir.go): a flag for one start,
	// never a setting.
	AcceptStoreLoss bool `yaml:"-"`
	// RateLimits are the submissions per user per hour for leaderboards
	// that set none, per category (test, ranked); 0 means no limit.
	RateLimits map[string]int `yaml:"rate_limits"`
	// MaxUploadBytes caps a submitted file.
	MaxUploadBytes int64 `yaml:"max_upload_bytes"`
	// MaxProblemBytes caps an uploaded problem set (compressed).
	MaxProblemBytes int64 `yaml:"max_problem_bytes"`
	// MaxConnections caps the open connections of each listener: past it,
	// new ones wait to be accepted, so a crowd of slow or idle clients
	// cannot take the daemon's descriptors and memory.
	MaxConnections int `yaml:"max_connections"`
	// BodyTimeout is how long a request may take to send its body (a
	// problem-set upload gets five times as long): a client that trickles
	// bytes holds a connection no longer than this.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// CgroupParent is the cgroup every sandbox's cgroup is made under, a
	// path from the root of every hierarchy. Empty (the default) picks one
	// (Daemon.placeCgroups): <unit>/runs under the systemd unit's cgroup
	// when the unit delegates it (Delegate=yes, cgroup v2), else
	// sandbox.DefaultCgroupParent of the data directory, so that two
	// daemons on one host never share one.
	CgroupParent string `yaml:"cgroup_parent"`
	// Budget bounds all sandboxes together (the parent cgroup), so the
	// daemon and the host stay responsive however many runs go at once.
	Budget BudgetConfig `yaml:"budget"`
	// Binds are extra read-only host paths for the sandbox (a CUDA toolkit
	// outside /usr).
	Binds []string `yaml:"binds"`
	// Profiler is profile mode's Nsight Compute.
	Profiler ProfilerConfig `yaml:"profiler"`
	// CacheBudget bounds each user's persistent compile cache (Triton,
	// load_inline, inductor, the CUDA driver's JIT) under DATA/cache,
	// which the user's runs share so that a resubmission does not compile
	// again; after each run the least recently used entries go until it
	// fits. 0 gives runs no persistent cache at all.
	CacheBudget policies.ByteSize `yaml:"cache_budget"`
	// LogLevel is the least level logged: debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// LogFormat is text (logfmt, for a terminal) or json (one object a
	// line, for journald and log shippers).
	LogFormat string `yaml:"log_format"`
	// Metrics serves /metrics in Prometheus's format, without a token
	// like /healthz: queue depths, job outcomes, GPU readings, HTTP
	// counts. It names no user and no code.
	Metrics bool `yaml:"metrics"`
	// Downloads is a directory of files the box hands out at /download:
	// the client-only CLI for contestants' machines (make dist), for a
	// hackathon without internet. Empty, or a directory that does not
	// exist, serves none.
	Downloads string `yaml:"downloads"`
	// MinFreeDisk is the free space the data directory's filesystem must
	// keep: below it the box refuses submissions (507) and health says
	// why, before SQLite or a run's files find the disk full.
	MinFreeDisk policies.ByteSize `yaml:"min_free_disk"`
	// Executor is where runs are carried out: local (this box's GPUs and
	// CPU slots) or slurm (the nodes of a Slurm cluster, this box being
	// the coordinator: docs/scale-out.md).
	Executor string `yaml:"executor"`
	// Slurm is the slurm executor's cluster.
	Slurm SlurmConfig `yaml:"slurm"`
}

// ProfilerConfig sets up profile mode on NVIDIA GPUs.
type ProfilerConfig struct {
	// NCU is the ncu program; empty finds it, "off" keeps profile mode to
	// PyTorch's profiler table.
	NCU string `yaml:"ncu"`
	// MaxKernels caps the kernels one run profiles: each is replayed once
	// per counter pass.
	MaxKernels int `yaml:"max_kernels"`
	// MaxReport caps a stored .ncu-rep file, like 256M.
	MaxReport policies.ByteSize `yaml:"max_report"`
}

// BudgetConfig is the sandboxes' shared budget; zero fields are unlimited.
type BudgetConfig struct {
	Memory policies.ByteSize `yaml:"memory"` // like 48G
	CPUs   float64           `yaml:"cpus"`
	Pids   int64             `yaml:"pids"`
}

// DefaultConfig is the configuration without a file or flags.
func DefaultConfig() Config {
	return Config{
		Version: "dev",
		DataDir: "/var/lib/kernelbox",
		Listen:  "127.0.0.1:8470",
		GPUs:    "auto",
		Measurement: runner.MeasureConfig{Gate: true, MaxTempC: 80, Wait: 2 * time.Minute, MemorySlack: 512 << 20,
			SampleEvery: 100 * time.Millisecond, HealthWait: 30 * time.Second, TieFloor: 0.01},
		Profiler:          ProfilerConfig{MaxKernels: 10, MaxReport: 256 << 20},
		CacheBudget:       2 << 30,
		MinFreeDisk:       256 << 20,
		CPUSlots:          1,
		Sandbox:           true,
		Library:           true,
		Grace:             30 * time.Second,
		LeaseTTL:          30 * time.Second,
		MaxQueuedPerUser:  20,
		MaxRunningPerUser: 2,
		BackfillLimit:     4,
		AgePerSecond:      1000,
		WarmStart:         true,
		Standby:           true,
		Canary:            10 * time.Minute,
		RateLimits:        map[string]int{api.CategoryTest: 120, api.CategoryRanked: 30},
		MaxUploadBytes:    problems.MaxSubmissionBytes,
		MaxProblemBytes:   64 << 20,
		MaxConnections:    1024,
		BodyTimeout:       time.Minute,
		LogLevel:          "info",
		LogFormat:         "text",
		Metrics:           true,
		Downloads:         "/usr/share/kernelbox/dist",
		Executor:          ExecutorLocal,
		Slurm:             defaultSlurmConfig(),
	}
}

// Validate checks every field and returns the errors together.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if c.DataDir == "" || !filepath.IsAbs(c.DataDir) {
		bad("data", "want an absolute directory, got %q", c.DataDir)
	}
	if c.Listen == "" && c.Socket == "-" {
		bad("listen", "neither a TCP address nor a socket: the API would be unreachable")
	}
	if c.GPUs != "auto" && c.GPUs != "none" {
		bad("gpus", "want auto or none, got %q", c.GPUs)
	}
	if m := c.Measurement; m.Wait < 0 || m.SampleEvery < 10*time.Millisecond {
		bad("measurement", "wait must not be negative and sample_every at least 10ms")
	}
	if c.Measurement.MemorySlack < 0 {
		bad("measurement.memory_slack", "must not be negative, got %s", c.Measurement.MemorySlack)
	}
	if p := c.Profiler; p.MaxKernels < 1 || p.MaxKernels > 1000 {
		bad("profiler.max_kernels", "want 1 to 1000 kernels, got %d", p.MaxKernels)
	}
	if c.Profiler.MaxReport < 1<<20 {
		bad("profiler.max_report", "want a size of at least 1M, like 256M, got %s", c.Profiler.MaxReport)
	}
	if c.BodyTimeout < time.Second {
		bad("body_timeout", "want at least 1s, got %s", c.BodyTimeout)
	}
	if c.MaxConnections < 16 {
		bad("max_connections", "want at least 16, got %d", c.MaxConnections)
	}
	if c.MinFreeDisk < 0 {
		bad("min_free_disk", "want a size, like 256M, or 0 for no check, got %s", c.MinFreeDisk)
	}
	if n := c.CacheBudget; n < 0 || (n > 0 && n < 1<<20) {
		bad("cache_budget", "want 0 (no compile cache) or a size of at least 1M, like 2G, got %s", n)
	}
	if p := c.Profiler.NCU; p != "" && p != "off" && !filepath.IsAbs(p) {
		bad("profiler.ncu", "want an absolute path or off, got %q", p)
	}
	if f := c.Measurement.TieFloor; f < 0 || f >= 0.5 {
		bad("measurement.tie_floor", "want a fraction from 0 to under 0.5, got %g", f)
	}
	if s := c.Measurement.FloorSlack; s < 0 || s > 1 {
		bad("measurement.floor_slack", "want a fraction between 0 and 1, got %g", s)
	}
	for t, ce := range c.Measurement.Ceilings {
		if ce.BytesPerSec < 0 || ce.BF16PerSec < 0 || ce.Int8PerSec < 0 || ce.ReadBytesPerSec < 0 {
			bad("measurement.ceilings", "%s: rates must not be negative", t)
		}
	}
	if c.CPUSlots < 0 || c.CPUSlots > 256 {
		bad("cpu_slots", "want 0 to 256, got %d", c.CPUSlots)
	}
	if c.Canary < 0 || (c.Canary > 0 && c.Canary < time.Minute) {
		bad("canary", "want 0 (off) or at least 1m, like 10m, got %s (one canary takes seconds to tens of seconds)", c.Canary)
	}
	if c.Grace < 0 {
		bad("grace", "must not be negative")
	}
	if c.LeaseTTL < time.Second {
		bad("lease_ttl", "want at least 1s, got %v", c.LeaseTTL)
	}
	if c.MaxQueuedPerUser < 1 {
		bad("max_queued_per_user", "want at least 1, got %d", c.MaxQueuedPerUser)
	}
	if c.MaxRunningPerUser < 0 {
		bad("max_running_per_user", "must not be negative")
	}
	if c.BackfillLimit < 0 {
		bad("backfill_limit", "must not be negative")
	}
	for k, v := range c.RateLimits {
		if k != api.CategoryTest && k != api.CategoryRanked {
			bad("rate_limits", "category %q: want test or ranked", k)
		}
		if v < 0 {
			bad("rate_limits", "%s: must not be negative", k)
		}
	}
	if c.MaxUploadBytes < 1024 || c.MaxUploadBytes > 64<<20 {
		bad("max_upload_bytes", "want 1 KiB to 64 MiB, got %d", c.MaxUploadBytes)
	}
	if c.MaxProblemBytes < 1<<20 {
		bad("max_problem_bytes", "want at least 1 MiB, got %d", c.MaxProblemBytes)
	}
	if n := c.Budget.Memory; n < 0 || (n > 0 && n < 256<<20) {
		bad("budget.memory", "want a size of at least 256M, like 48G, got %s", n)
	}
	if c.CgroupParent != "" {
		if err := sandbox.CheckCgroupParent(c.CgroupParent); err != nil {
			bad("cgroup_parent", "%v", err)
		}
	}
	if c.Budget.CPUs < 0 || c.Budget.Pids < 0 {
		bad("budget", "cpus and pids must not be negative")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		bad("log_level", "want debug, info, warn or error, got %q", c.LogLevel)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log_format", "want text or json, got %q", c.LogFormat)
	}
	if c.Downloads != "" && !filepath.IsAbs(c.Downloads) {
		bad("downloads", "want an absolute directory or nothing, got %q", c.Downloads)
	}
	for _, b := range c.Binds {
		if !filepath.IsAbs(b) {
			bad("binds", "%q is not an absolute path", b)
		}
	}
	switch c.Executor {
	case ExecutorLocal:
	case ExecutorSlurm:
		c.Slurm.validate(bad)
	default:
		bad("executor", "want local or slurm, got %q", c.Executor)
	}
	return errors.Join(errs...)
}

// socketPath is where the unix socket goes, "" for none.
func (c *Config) socketPath() string {
	switch c.Socket {
	case "-":
		return ""
	case "":
		return filepath.Join(c.DataDir, "kernelbox.sock")
	}
	return c.Socket
}
