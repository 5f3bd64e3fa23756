//go:build linux && cgo

package cli

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"kernelbox/appliance"
	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/gpu"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check that this host can run kernelbox, and say what to fix",
		Flags: []cli.Flag{pythonFlag(),
			&cli.StringFlag{Name: "coordinator", Usage: "on a Slurm node: the coordinator's URL, checked with what the node side needs"},
			&cli.StringFlag{Name: "shared-dir", Usage: "on a Slurm node whose coordinator has a slurm.shared_dir: that directory, checked with what the node side needs"},
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{"KERNELBOX_CONFIG"},
				Usage: "the daemon's config file, checked and read for its python (default " + defaultConfigFile + " when it exists)"}},
		Action: runDoctor,
	}
}

func runDoctor(c *cli.Context) error {
	checks := sandbox.HostChecks()
	cfgCheck, cfg := doctorConfig(c)
	if cfgCheck != nil {
		checks = append(checks, *cfgCheck)
	}
	onNode := c.String("coordinator") != "" || c.String("shared-dir") != ""
	if cfg.Executor == appliance.ExecutorSlurm && !onNode {
		// A coordinator runs nothing itself: what it needs is Slurm.
		return printChecks(c, append(checks, coordinatorChecks(c.Context, cfg.Slurm)...))
	}
	if os.Geteuid() == 0 {
		// The packaged unit runs the daemon with UMask=0077, and a login
		// shell has 0022: check under the unit's, or a mode the umask
		// breaks passes here and fails every run of the service.
		unix.Umask(unitUmask)
		checks = append(checks, sandboxSmokeTest(c))
	}
	inv := gpu.Discover(c.Context, gpu.Options{Aliases: cfg.GPUAliases})
	if cfg.GPUs == "none" {
		inv = gpu.Inventory{Notes: []string{"gpus: none in the config"}}
	}
	if !c.IsSet("python") && cfg.Python != "" {
		_ = c.Set("python", cfg.Python)
	}
	it, err := findPython(c)
	if err != nil {
		checks = append(checks, sandbox.Check{Name: "harness Python", Info: firstLineOf(err.Error()),
			Fix: "install PyTorch (apt-get install python3-torch, or packaging/setup.sh) or set python in the config"})
	} else {
		ch := sandbox.Check{Name: "harness Python", OK: true,
			Info: fmt.Sprintf("%s (Python %s, torch %s, %s)", it.Path, it.Python, it.Torch, it.Device)}
		if len(inv.GPUs) > 0 && it.Device == "cpu" {
			ch.OK = false
			ch.Info += ": this torch cannot reach the GPUs (a CPU build, or no driver it can load)"
			ch.Fix = "install a CUDA (or ROCm) build of PyTorch, in a virtual environment if you like, and set python in the config to its interpreter"
		}
		checks = append(checks, ch)
		if os.Geteuid() == 0 {
			checks = append(checks, canaryCheck(c, it, cfg))
		}
	}
	checks = append(checks, gpuChecks(inv)...)
	if onNode {
		checks = append(checks, nodeChecks(c.Context, c.String("coordinator"), c.String("shared-dir"))...)
	}
	return printChecks(c, checks)
}

// printChecks writes a line per check, with the fix of each that failed.
func printChecks(c *cli.Context, checks []sandbox.Check) error {
	w := c.App.Writer
	failed := 0
	for _, ch := range checks {
		mark := "✓"
		if !ch.OK {
			mark = "✗"
			failed++
		}
		fmt.Fprintf(w, "%s %-22s %s\n", mark, ch.Name, ch.Info)
		if !ch.OK && ch.Fix != "" {
			fmt.Fprintf(w, "  fix: %s\n", ch.Fix)
		}
	}
	if failed > 0 {
		return &ExitError{Code: api.ExitFailed, Err: fmt.Errorf("doctor: %d of %d checks failed", failed, len(checks))}
	}
	fmt.Fprintln(w, "all checks passed")
	return nil
}

// sandboxSmokeTest starts one real container: the proof that everything
// above fits together.
func sandboxSmokeTest(c *cli.Context) sandbox.Check {
	ch := sandbox.Check{Name: "sandbox run", Fix: "see the error; kernelbox sandbox run -- /bin/true shows it again"}
	rt, cleanup, err := runner.NewOneShotRuntime(slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		ch.Info = err.Error()
		return ch
	}
	defer cleanup()
	l := policies.DefaultLimits()
	l.WallTime = 20 * time.Second
	res, err := rt.Run(c.Context, sandbox.Spec{Args: []string{"/bin/true"}, Env: runner.SandboxEnv(), Binds: sandbox.DefaultBinds(), Limits: l})
	switch {
	case err != nil:
		ch.Info = err.Error()
	case res.Verdict != sandbox.VerdictOK:
		ch.Info = fmt.Sprintf("verdict %s %s", res.Verdict, res.Error)
	default:
		ch.OK, ch.Info = true, fmt.Sprintf("/bin/true in %s", res.Wall.Round(time.Millisecond))
	}
	return ch
}

// unitUmask is packaging/deb/kernelbox.service's UMask.
const unitUmask = 0o077

// canaryCheck evaluates the daemon's canary (a bundled problem, an honest
// submission, test mode) in a one-shot sandbox built as the daemon builds
// its own, on the CPU backend: the proof that the sandbox, the harness
// and the judge fit together on this host. The daemon runs the same
// check on each of its GPU types (GET /api/health, /readyz).
func canaryCheck(c *cli.Context, it *problems.Interpreter, cfg appliance.Config) sandbox.Check {
	ch := sandbox.Check{Name: "canary"}
	rt, cleanup, err := runner.NewOneShotRuntime(slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		ch.Info, ch.Fix = err.Error(), "see the sandbox run check above"
		return ch
	}
	defer cleanup()
	scratch, err := os.MkdirTemp("", "kernelbox-canary-")
	if err != nil {
		ch.Info = err.Error()
		return ch
	}
	defer os.RemoveAll(scratch)
	var binds []sandbox.Bind
	for _, b := range cfg.Binds {
		binds = append(binds, sandbox.Bind{Source: b})
	}
	l, env := runner.NewSandboxLauncher(rt, runner.LauncherSpec{Python: it, Binds: binds, Limits: policies.ForMode(string(problems.ModeTest), 0)})
	begin := time.Now()
	err = runner.RunCanary(c.Context, runner.CanaryRun{Launcher: l, Env: env, Python: it.Path, Device: "cpu", Arch: "cpu", Scratch: scratch})
	if err != nil {
		ch.Info, ch.Fix = err.Error(), runner.CanaryFix(err.Error())
		return ch
	}
	ch.OK, ch.Info = true, fmt.Sprintf("an honest vectoradd passed test mode in the sandbox, under umask %04o, in %s", unitUmask, time.Since(begin).Round(time.Millisecond))
	return ch
}

// gpuChecks list the GPUs discovery finds and, on NVIDIA, whether
// profiling is open to non-admin users (ncu in the sandbox runs as uid
// 65534). A box without GPUs passes: it runs the CPU backend, and the check
// says why each backend found nothing.
func gpuChecks(inv gpu.Inventory) []sandbox.Check {
	if len(inv.GPUs) == 0 {
		return []sandbox.Check{{Name: "GPUs", OK: true, Info: "none, so the CPU backend serves this box (" + strings.Join(inv.Notes, "; ") + ")"}}
	}
	var out []sandbox.Check
	for _, g := range inv.GPUs {
		ch := sandbox.Check{Name: fmt.Sprintf("GPU %d", g.Index), OK: true,
			Info: fmt.Sprintf("%s → type %s, %s, %s, NUMA %d, %d GiB", g.Name, g.Type, g.UUID, g.PCI, g.NUMANode, g.Memory>>30)}
		for _, n := range g.Nodes {
			if !fileExists(n.Path) && n.Path != "/dev/nvidia-uvm" {
				ch.OK, ch.Info = false, ch.Info+"; missing "+n.Path
				ch.Fix = "the driver creates its device nodes at load (nvidia-modprobe -c 0 -u for NVIDIA)"
			}
		}
		out = append(out, ch)
	}
	if inv.Vendor == gpu.VendorNVIDIA {
		out = append(out, sandbox.Check{Name: "NVIDIA driver", OK: inv.Driver != "", Info: inv.Driver,
			Fix: "NVML answered no driver version: reinstall the driver (nvidia-smi should work)"})
		out = append(out, nvccCheck())
		restricted, err := gpu.ProfilingRestricted("/")
		info := "RmProfilingAdminOnly 0: contestants' runs may read the GPU's counters"
		if restricted {
			info = "RmProfilingAdminOnly 1: only administrators may profile"
			if err != nil {
				info = err.Error()
			}
		}
		out = append(out, sandbox.Check{Name: "ncu permission", OK: !restricted, Info: info, Fix: gpu.ProfilingFix + "; until then profile mode prints PyTorch's profiler table"})
		ncu, err := gpu.FindNCU("")
		ch := sandbox.Check{Name: "ncu", OK: err == nil, Info: ncu.Path,
			Fix: "install Nsight Compute (the CUDA toolkit's nsight-compute package) or set profiler.ncu; until then profile mode prints PyTorch's profiler table"}
		if err != nil {
			ch.Info = err.Error()
		}
		out = append(out, ch)
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// nvccCheck looks for the CUDA toolkit's compiler, which native .cu
// submissions and load_inline need (Python and Triton ones do not).
func nvccCheck() sandbox.Check {
	ch := sandbox.Check{Name: "CUDA toolkit",
		Fix: "install the CUDA toolkit (nvcc) matching the driver, and bind it into the sandbox (binds: [/usr/local/cuda] in the config) if it is outside /usr; without it .cu and load_inline submissions fail to compile"}
	p, err := exec.LookPath("nvcc")
	if err != nil {
		if fileExists("/usr/local/cuda/bin/nvcc") {
			p = "/usr/local/cuda/bin/nvcc"
		} else {
			ch.Info = "no nvcc on PATH or in /usr/local/cuda/bin"
			return ch
		}
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil {
		ch.Info = fmt.Sprintf("%s --version: %v", p, err)
		return ch
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	ch.OK, ch.Info = true, p+" ("+strings.TrimSpace(lines[len(lines)-1])+")"
	return ch
}

// doctorConfig checks the daemon's config file when there is one (the
// flag, or the package's when it exists), and returns what it holds, or
// the defaults.
func doctorConfig(c *cli.Context) (*sandbox.Check, appliance.Config) {
	path := c.String("config")
	if path == "" {
		if !fileExists(defaultConfigFile) {
			return nil, appliance.DefaultConfig()
		}
		path = defaultConfigFile
	}
	cfg, err := loadConfig(path)
	if err != nil {
		lines := strings.Split(err.Error(), "\n")
		info := lines[0]
		if len(lines) > 1 { // the file's name, then a line per problem
			info = path + ": " + lines[1]
		}
		return &sandbox.Check{Name: "config", Info: info + " (kernelbox config check " + path + " lists every problem)",
			Fix: "correct the file (docs/configuration.md lists the keys)"}, appliance.DefaultConfig()
	}
	return &sandbox.Check{Name: "config", OK: true, Info: path}, cfg
}
