//go:build linux && cgo

package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"kernelbox/appliance"
	"kernelbox/appliance/api"
	"kernelbox/sandbox"
)

// EnvJobToken may carry a run's job token to `kernelbox node run-job` run
// by hand; the coordinator's batch script passes it on a file descriptor
// (--token-fd), so that it shows in no process's arguments or environment.
const EnvJobToken = "KERNELBOX_JOB_TOKEN"

func nodeCommand() *cli.Command {
	return &cli.Command{
		Name:  "node",
		Usage: "the node side of the slurm executor (docs/scale-out.md)",
		Subcommands: []*cli.Command{{
			Name:  "run-job",
			Usage: "run one run the coordinator handed to Slurm, and report it (a Slurm job runs this)",
			Description: "The run's job token comes on --token-fd (or in " + EnvJobToken + "). The node's own config file (--config,\n" +
				"or " + defaultConfigFile + " when it exists) gives its sandbox, Python and measurement.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "coordinator", Usage: "the coordinator's API, like http://kernelbox.cluster:8470"},
				&cli.StringFlag{Name: "shared-dir", Usage: "instead of --coordinator: the coordinator's directory on the cluster's shared filesystem (slurm.shared_dir)"},
				&cli.Int64Flag{Name: "run", Required: true, Usage: "the run to carry out"},
				&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "this node's config file"},
				&cli.IntFlag{Name: "token-fd", Value: -1, Usage: "read the job token from this open file descriptor (the batch script's way) instead of " + EnvJobToken},
			},
			Action: runNodeJob,
		}},
	}
}

func runNodeJob(c *cli.Context) error {
	if (c.String("coordinator") == "") == (c.String("shared-dir") == "") {
		return usageError("node run-job: give --coordinator or --shared-dir, one of them")
	}
	token, err := jobToken(c.Int("token-fd"))
	if err != nil {
		return usageError("node run-job: %v", err)
	}
	// sbatch hands the job the submitter's umask (SLURM_UMASK): the
	// coordinator's, 0077 under the packaged unit, or whatever a shell that
	// ran it had. The node's runs set their modes explicitly; its own
	// files (reports, the shared directory's) get the unit's umask here,
	// whatever the submitter's was.
	unix.Umask(unitUmask)
	cfg, err := nodeConfig(c.String("config"))
	if err != nil {
		return usageError("node run-job: %v", err)
	}
	cfg.Version = version()
	log := newLogger(c.App.ErrWriter, cfg.LogLevel, cfg.LogFormat)
	o := appliance.NodeOptions{Coordinator: c.String("coordinator"), SharedDir: c.String("shared-dir"), Run: c.Int64("run"), Token: token,
		SlurmJob: os.Getenv("SLURM_JOB_ID"), GPUs: os.Getenv("SLURM_JOB_GPUS"), Node: os.Getenv("SLURMD_NODENAME")}
	// scancel sends SIGTERM: the run's sandboxes are stopped, not left behind.
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := appliance.RunNodeJob(ctx, cfg, o, log); err != nil {
		return &ExitError{Code: api.ExitServer, Err: fmt.Errorf("node run-job: %w", err)}
	}
	return nil
}

// jobToken reads the run's job token from fd (the batch script's
// here-document), or else from the environment, which it then clears so
// that no child process inherits it.
func jobToken(fd int) (string, error) {
	if fd >= 0 {
		f := os.NewFile(uintptr(fd), "job token")
		if f == nil {
			return "", fmt.Errorf("--token-fd %d is not an open file", fd)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 4096))
		if err != nil {
			return "", fmt.Errorf("read the job token from fd %d: %w", fd, err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("fd %d holds no job token", fd)
	}
	t := os.Getenv(EnvJobToken)
	os.Unsetenv(EnvJobToken)
	if t == "" {
		return "", fmt.Errorf("no job token: the coordinator's batch script passes it with --token-fd, or set %s", EnvJobToken)
	}
	return t, nil
}

// nodeConfig is the node's config: the file given, else the package's
// when it exists, else the defaults.
func nodeConfig(path string) (appliance.Config, error) {
	if path == "" {
		if !fileExists(defaultConfigFile) {
			return appliance.DefaultConfig(), nil
		}
		path = defaultConfigFile
	}
	return loadConfig(path)
}

// nodeChecks are doctor's checks of what a Slurm node needs besides what
// every box needs: the coordinator within reach and of the same version,
// or the shared directory writable, and the GRES this node's slurmd
// reports (for slurm.pools).
func nodeChecks(ctx context.Context, coordinator, sharedDir string) []sandbox.Check {
	var out []sandbox.Check
	if coordinator != "" {
		out = append(out, coordinatorCheck(ctx, coordinator))
	}
	if sharedDir != "" {
		out = append(out, sharedDirCheck(sharedDir))
	}
	gres := sandbox.Check{Name: "Slurm GRES", OK: true}
	if path, err := exec.LookPath("slurmd"); err != nil {
		gres.OK, gres.Info = false, "no slurmd on PATH: this is not a Slurm node"
		gres.Fix = "run doctor --coordinator on a node of the cluster (apt-get install slurmd)"
	} else if b, err := exec.CommandContext(ctx, path, "-G").CombinedOutput(); err != nil {
		gres.OK, gres.Info = false, "slurmd -G: "+firstLineOf(strings.TrimSpace(string(b)))
		gres.Fix = "fix gres.conf: slurmd -G shows what slurmd would report"
	} else {
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if i := strings.Index(l, "Gres Name="); i >= 0 {
				lines = append(lines, strings.Join(strings.Fields(l[i:])[:min(4, len(strings.Fields(l[i:])))], " "))
			}
		}
		gres.Info = "slurmd reports " + strings.Join(lines, "; ")
		if len(lines) == 0 {
			gres.Info = "slurmd reports no GRES: only a CPU pool (gres empty) can run here"
		}
	}
	return append(out, gres)
}

// coordinatorCheck checks that the coordinator answers, of this node's
// version.
func coordinatorCheck(ctx context.Context, coordinator string) sandbox.Check {
	ch := sandbox.Check{Name: "coordinator", Fix: "start the coordinator, or check the URL and the firewall between this node and it"}
	c, err := api.NewClient(coordinator, "")
	if err == nil {
		defer c.Close()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var h *api.Health
		if h, err = c.Health(ctx); err == nil {
			ch.OK, ch.Info = true, fmt.Sprintf("%s answers: kernelbox %s, %s", coordinator, h.Version, h.Status)
			dev := func(v string) bool { return v == "dev" || v == "(devel)" || v == "" }
			if dev(h.Version) || dev(version()) {
				ch.Info += " (a development build: versions not compared)"
			} else if h.Version != version() {
				ch.OK = false
				ch.Info += fmt.Sprintf("; this node has kernelbox %s", version())
				ch.Fix = "install the coordinator's version of kernelbox on the node: the node protocol is the coordinator's"
			}
		}
	}
	if err != nil {
		ch.Info = err.Error()
	}
	return ch
}

// sharedDirCheck checks that this user can write in the shared directory
// (slurm.shared_dir), where runs and reports go between the coordinator
// and the nodes.
func sharedDirCheck(dir string) sandbox.Check {
	ch := sandbox.Check{Name: "shared directory", Fix: "mount the cluster's shared filesystem here, and give the user the jobs run as (the coordinator's) this directory"}
	f, err := os.CreateTemp(dir, ".kernelbox-doctor-")
	if err != nil {
		ch.Info = err.Error()
		return ch
	}
	f.Close()
	os.Remove(f.Name())
	ch.OK, ch.Info = true, dir+" is writable here"
	return ch
}

// coordinatorChecks are doctor's checks of a coordinator (executor:
// slurm): Slurm's commands, and a node of the partition offering each
// pool's GRES, so that a wrong pool is found before its runs fail.
func coordinatorChecks(ctx context.Context, sc appliance.SlurmConfig) []sandbox.Check {
	cmds := sandbox.Check{Name: "Slurm commands", OK: true, Info: "sbatch, squeue, scancel, sinfo found"}
	for _, name := range []string{"sbatch", "squeue", "scancel", "sinfo"} {
		if _, err := exec.LookPath(sc.Program(name)); err != nil {
			cmds = sandbox.Check{Name: "Slurm commands", Info: fmt.Sprintf("%s: %v", name, err),
				Fix: "install slurm-client (and the cluster's munge key), or set slurm.bin"}
			return []sandbox.Check{cmds}
		}
	}
	args := []string{"--noheader", "--format=%G"}
	where := "the default partition"
	if sc.Partition != "" {
		args = append(args, "--partition="+sc.Partition)
		where = "partition " + sc.Partition
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, sc.Program("sinfo"), args...).CombinedOutput()
	if err != nil {
		return []sandbox.Check{cmds, {Name: "Slurm", Info: "sinfo: " + firstLineOf(strings.TrimSpace(string(out))),
			Fix: "start slurmctld, or check munge and slurm.conf on this machine"}}
	}
	checks := []sandbox.Check{cmds}
	if sc.SharedDir != "" {
		checks = append(checks, sharedDirCheck(sc.SharedDir))
	}
	offered := strings.Fields(strings.ReplaceAll(string(out), ",", " "))
	for _, p := range sc.Pools {
		ch := sandbox.Check{Name: "Slurm pool " + p.GPUType, OK: true}
		if p.GRES == "" {
			ch.Info = "no GRES asked (a CPU pool) in " + where
			checks = append(checks, ch)
			continue
		}
		want := "gpu:" + p.GRES + ":"
		found := ""
		for _, g := range offered {
			if strings.HasPrefix(g, want) {
				found = g
				break
			}
		}
		if found == "" {
			ch.OK = false
			ch.Info = fmt.Sprintf("no node of %s offers %s (its nodes offer: %s)", where, strings.TrimSuffix(want, ":"), strings.Join(offered, " "))
			ch.Fix = "set the pool's gres to a GPU type the cluster's gres.conf names, or the partition that has them"
		} else {
			ch.Info = fmt.Sprintf("%s offers %s", where, found)
		}
		checks = append(checks, ch)
	}
	return checks
}
