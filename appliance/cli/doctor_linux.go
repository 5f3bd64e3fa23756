//go:build linux && cgo

package cli

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance"
	"kernelbox/appliance/api"
	"kernelbox/gpu"
	"kernelbox/policies"
	"kernelbox/sandbox"
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:   "doctor",
		Usage:  "check that this host can run kernelbox, and say what to fix",
		Flags:  []cli.Flag{pythonFlag()},
		Action: runDoctor,
	}
}

func runDoctor(c *cli.Context) error {
	checks := sandbox.HostChecks()
	if os.Geteuid() == 0 {
		checks = append(checks, sandboxSmokeTest(c))
	}
	if it, err := findPython(c); err != nil {
		checks = append(checks, sandbox.Check{Name: "harness Python", Info: firstLineOf(err.Error()),
			Fix: "install PyTorch (apt-get install python3-torch, or packaging/setup.sh) or pass --python"})
	} else {
		checks = append(checks, sandbox.Check{Name: "harness Python", OK: true,
			Info: fmt.Sprintf("%s (Python %s, torch %s, %s)", it.Path, it.Python, it.Torch, it.Device)})
	}
	checks = append(checks, gpuChecks(c)...)

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
	rt, cleanup, err := appliance.NewOneShotRuntime(slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		ch.Info = err.Error()
		return ch
	}
	defer cleanup()
	l := policies.DefaultLimits()
	l.WallTime = 20 * time.Second
	res, err := rt.Run(c.Context, sandbox.Spec{Args: []string{"/bin/true"}, Env: appliance.SandboxEnv(), Binds: sandbox.DefaultBinds(), Limits: l})
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

// gpuChecks list the GPUs discovery finds and, on NVIDIA, whether
// profiling is open to non-admin users (ncu in the sandbox runs as uid
// 65534). A box without GPUs passes: it runs the CPU backend, and the check
// says why each backend found nothing.
func gpuChecks(c *cli.Context) []sandbox.Check {
	inv := gpu.Discover(c.Context, gpu.Options{})
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
