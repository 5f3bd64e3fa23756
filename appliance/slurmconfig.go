package appliance

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"kernelbox/appliance/runner"
)

// The executors a config names.
const (
	ExecutorLocal = "local"
	ExecutorSlurm = "slurm"
)

// SlurmConfig is the slurm executor's cluster: where the coordinator
// submits its runs, and how the nodes find it again.
type SlurmConfig struct {
	// Coordinator is this daemon's API as the nodes reach it, like
	// http://kernelbox.cluster:8470: they fetch their runs from it and
	// report back to it.
	Coordinator string `yaml:"coordinator"`
	// SharedDir, when set, is a directory of the cluster's shared
	// filesystem, the same path on the coordinator and the nodes: the
	// nodes take their runs from it and report there instead of to
	// Coordinator, which they then need not reach.
	SharedDir string `yaml:"shared_dir"`
	// Partition is the partition the runs are submitted to; empty for the
	// cluster's default.
	Partition string `yaml:"partition"`
	// Pools map the cluster's GPUs to leaderboards' GPU types, one pool a
	// GPU type: a leaderboard's times on a type all come from one pool.
	Pools []SlurmPool `yaml:"pools"`
	// Command is the node side's program with any leading arguments; the
	// coordinator appends `node run-job` and the run's flags.
	Command []string `yaml:"command"`
	// NodeConfig, when set, is the config file the node side reads (its
	// sandbox, Python and measurement), passed as --config.
	NodeConfig string `yaml:"node_config"`
	// Bin is the directory of sbatch, squeue and scancel; empty for PATH.
	Bin string `yaml:"bin"`
	// Args are more sbatch arguments, like --account=gpu-contest or
	// --qos=high.
	Args []string `yaml:"args"`
	// Poll is how often squeue is asked about the jobs in Slurm: how soon
	// a job Slurm lost is noticed and tried again.
	Poll time.Duration `yaml:"poll"`
	// TimeLimit is each job's Slurm time limit (--time): a run that goes
	// past it is stopped by Slurm, and its verdict is "timed out", with
	// the limit (not tried again).
	TimeLimit time.Duration `yaml:"time_limit"`
	// Output is where a job's output goes on the node (sbatch --output,
	// %j the job id); /dev/null by default, as the node reports its
	// errors to the coordinator.
	Output string `yaml:"output"`
	// RankUnsandboxed lets a run from a node without the sandbox (its
	// config says sandbox: false: the code ran as root with the network
	// up) rank, marked on the leaderboard. Off, such a run's result is
	// kept for its owner, with the reason, and never ranks.
	RankUnsandboxed bool `yaml:"rank_unsandboxed"`
	// Patience is how long runs wait for an unreachable controller (sbatch
	// and squeue failing to reach slurmctld: restarting, failing over, cut
	// off) before their attempts count as failed; 0 counts them at once.
	Patience time.Duration `yaml:"patience"`
}

// SlurmPool is one kind of GPU on the cluster.
type SlurmPool struct {
	// GRES is the Slurm GRES type of the pool's GPUs (gpu:<gres>:<k>), like
	// h100; empty asks for no GRES (a pool of CPU nodes).
	GRES string `yaml:"gres"`
	// GPUType is what leaderboards call it: H100, or cpu for the CPU
	// backend. The node checks that its GPUs are of this type.
	GPUType string `yaml:"gpu_type"`
	// GPUs is how many of the pool's GPUs the coordinator's runs may hold
	// at once, running or waiting in Slurm.
	GPUs int `yaml:"gpus"`
}

func defaultSlurmConfig() SlurmConfig {
	return SlurmConfig{Command: []string{"kernelbox"}, Poll: 2 * time.Second, TimeLimit: time.Hour, Output: "/dev/null",
		Patience: 30 * time.Minute}
}

// validate checks the slurm executor's settings, reporting through bad.
func (c *SlurmConfig) validate(bad func(field, format string, args ...any)) {
	if c.SharedDir != "" && !filepath.IsAbs(c.SharedDir) {
		bad("slurm.shared_dir", "want an absolute directory of the cluster's shared filesystem, got %q", c.SharedDir)
	}
	if u, err := url.Parse(c.Coordinator); (c.SharedDir == "" || c.Coordinator != "") &&
		(err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		bad("slurm.coordinator", "want the URL the nodes reach this daemon at, like http://kernelbox.cluster:8470 (or a slurm.shared_dir), got %q", c.Coordinator)
	}
	if len(c.Pools) == 0 {
		bad("slurm.pools", "want at least one pool (gres, gpu_type, gpus)")
	}
	seen := map[string]bool{}
	for i, p := range c.Pools {
		field := fmt.Sprintf("slurm.pools[%d]", i)
		switch {
		case p.GPUType == "":
			bad(field+".gpu_type", "want the leaderboards' name of the pool's GPUs, like H100 or cpu")
		case seen[p.GPUType]:
			bad(field+".gpu_type", "%s is another pool's too: a leaderboard's times on a GPU type must come from one pool", p.GPUType)
		}
		seen[p.GPUType] = true
		if p.GPUs < 1 || p.GPUs > 4096 {
			bad(field+".gpus", "want 1 to 4096, got %d", p.GPUs)
		}
		if strings.ContainsAny(p.GRES, ":, \t") {
			bad(field+".gres", "want a GRES type like h100 (the coordinator asks for gpu:<gres>:<k>), got %q", p.GRES)
		}
	}
	if len(c.Command) == 0 || c.Command[0] == "" {
		bad("slurm.command", "want the node side's program, like [kernelbox] or [/usr/bin/kernelbox]")
	}
	if c.Bin != "" && !filepath.IsAbs(c.Bin) {
		bad("slurm.bin", "want an absolute directory or nothing, got %q", c.Bin)
	}
	if c.Poll < 100*time.Millisecond {
		bad("slurm.poll", "want at least 100ms, got %v", c.Poll)
	}
	if c.TimeLimit < time.Minute {
		bad("slurm.time_limit", "want at least 1m, got %v", c.TimeLimit)
	}
	if c.Patience < 0 {
		bad("slurm.patience", "want a duration of 0 or more, got %v", c.Patience)
	}
	if c.Output == "" {
		bad("slurm.output", "want a file on the node, like /dev/null or /var/log/kernelbox/job-%%j.out")
	}
}

// slots are the pools' places in the coordinator's runner: one a GPU the
// runs may hold in Slurm, named slurm:<type>:<n>. They have no GPU of
// their own here: the node gates, samples and checks its GPUs.
func (c *SlurmConfig) slots() []runner.Slot {
	var out []runner.Slot
	for _, p := range c.Pools {
		device := "cuda"
		if p.GPUType == "cpu" {
			device = "cpu"
		}
		for i := range p.GPUs {
			out = append(out, runner.Slot{ID: fmt.Sprintf("slurm:%s:%d", p.GPUType, i), GPUType: p.GPUType, Device: device,
				Clocks: "the node's"})
		}
	}
	return out
}

// Program is the path of one of Slurm's commands: in Bin, or on PATH.
func (c *SlurmConfig) Program(name string) string {
	if c.Bin == "" {
		return name
	}
	return filepath.Join(c.Bin, name)
}

// pool is the pool of a GPU type.
func (c *SlurmConfig) pool(gpuType string) (SlurmPool, bool) {
	for _, p := range c.Pools {
		if p.GPUType == gpuType {
			return p, true
		}
	}
	return SlurmPool{}, false
}
