package appliance

// What the daemon sets up on the host before its runner starts: the GPU
// monitor and its clock locks, the harness interpreter and the sandbox.

import (
	"context"
	"fmt"
	"path/filepath"

	"kernelbox/appliance/runner"
	"kernelbox/gpu"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/sandbox"
)

// openMonitor keeps NVML open for the runner's gate and telemetry, and
// locks the clocks the configuration asks for, recording each slot's
// clock profile. A monitor that cannot open leaves the runs unmeasured and
// says so; it does not stop the daemon.
func (d *Daemon) openMonitor(slots []runner.Slot) {
	amd := d.inventory.Vendor == gpu.VendorAMD
	if (d.inventory.Vendor != gpu.VendorNVIDIA && !amd) || len(slots) == 0 {
		return
	}
	lib := d.nvml
	switch {
	case amd:
		lib = gpu.NewAMDSysfs(d.gpuRoot, d.inventory.GPUs)
	case lib == nil:
		lib = gpu.NewNVML()
	}
	m, err := gpu.OpenMonitor(lib)
	if err != nil {
		d.log.Error("no GPU telemetry: timed runs are neither gated nor checked for throttling", "err", err)
		return
	}
	d.monitor = m
	if m.XidErr != nil && !amd {
		d.log.Warn("Xid errors are not watched: only ECC, row remapping and leftovers are checked between jobs", "err", m.XidErr)
	}
	for i := range slots {
		s := &slots[i]
		if s.GPU.Parent != "" {
			s.Clocks = "the parent GPU's (MIG instance: runs are not gated or sampled)"
			continue
		}
		s.Clocks = "default (no clock lock configured for " + s.GPUType + ")"
		spec, ok := d.cfg.Measurement.Clocks[s.GPUType]
		if !ok {
			continue
		}
		if amd {
			// amdgpu fixes its own clocks for comparable timings.
			if err := m.LockClocks(s.GPU.UUID, 0, 0); err != nil {
				s.Clocks = "default (profile_standard refused: " + err.Error() + ")"
				d.log.Warn("profile_standard refused; the GPU keeps its default clocks", "gpu", s.GPU.UUID, "err", err)
				continue
			}
			s.Clocks = "profile_standard"
			if !spec.Standard {
				s.Clocks += " (amdgpu picks the clocks; the MHz in the config are not applied)"
			}
			d.log.Info("clocks fixed at profile_standard", "gpu", s.GPU.UUID)
			continue
		}
		if spec.Standard {
			s.Clocks = "default (standard is AMD's profile_standard; NVIDIA GPUs need MHz)"
			d.log.Warn("measurement.clocks: standard is for AMD GPUs", "gpu", s.GPU.UUID)
			continue
		}
		lo, hi := spec.Lo, spec.Hi
		if err := m.LockClocks(s.GPU.UUID, lo, hi); err != nil {
			s.Clocks = "default (locking failed: " + err.Error() + ")"
			d.log.Warn("clock lock refused; the GPU keeps its default clocks", "gpu", s.GPU.UUID, "err", err)
			continue
		}
		s.Clocks = fmt.Sprintf("locked %d-%d MHz", lo, hi)
		d.log.Info("clocks locked", "gpu", s.GPU.UUID, "min_mhz", lo, "max_mhz", hi)
	}
}

// prepareRunner finds the harness interpreter and the sandbox, and says
// why either is missing (health notes); m counts the sandbox's verdicts.
func (d *Daemon) prepareRunner(ctx context.Context, m *metrics) (*problems.Interpreter, runner.LaunchFunc, []string) {
	var health []string
	it, err := d.Python, error(nil)
	switch {
	case it != nil: // given by the caller
	case d.cfg.Python != "":
		it, err = problems.ProbePython(ctx, d.cfg.Python)
	default:
		it, err = problems.FindPython(ctx, problems.PythonCandidates())
	}
	if err != nil {
		health = append(health, fmt.Sprintf("no Python with PyTorch (%v); install python3-torch or set python in the config", err))
		it = &problems.Interpreter{}
	}
	if !d.cfg.Sandbox {
		d.log.Warn("the sandbox is off: submissions run as the daemon's user, with its access (development only)")
		return it, func(runner.Gang, problems.Mode) (problems.Launcher, []string) {
			return problems.ExecLauncher{}, runner.SandboxEnv(it.BinDir)
		}, health
	}
	rt, err := sandbox.NewRuntime(filepath.Join(d.cfg.DataDir, "sandbox"), d.log)
	if err == nil {
		err = d.placeCgroups(rt)
	}
	if err != nil {
		if rt != nil {
			_ = rt.Close()
		}
		return it, nil, append(health, fmt.Sprintf("no sandbox: %v", err))
	}
	d.rt = rt
	if err := rt.SetBudget(sandbox.Budget{Memory: int64(d.cfg.Budget.Memory), CPUs: d.cfg.Budget.CPUs, Pids: d.cfg.Budget.Pids}); err != nil {
		return it, nil, append(health, fmt.Sprintf("sandbox budget: %v", err))
	}
	if n, err := rt.CleanStale(); err != nil {
		d.log.Warn("clean stale sandboxes", "err", err)
	} else if n > 0 {
		d.log.Warn("removed sandboxes an earlier daemon left", "containers", n)
	}
	var extra []sandbox.Bind
	for _, b := range d.cfg.Binds {
		extra = append(extra, sandbox.Bind{Source: b})
	}
	return it, func(g runner.Gang, mode problems.Mode) (problems.Launcher, []string) {
		spec := runner.LauncherSpec{Python: it, Binds: extra, Devices: g.Devices(mode), Limits: policies.ForMode(string(mode), 0), Mask: g.Mask()}
		spec.Limits.Cpuset = g.Cpuset()
		if mode == problems.ModeProfile && g[0].GPU != nil {
			spec.Binds = append(append([]sandbox.Bind(nil), extra...), d.profilerBinds...)
		}
		l, env := runner.NewSandboxLauncher(countVerdicts{rt, m}, spec)
		return l, append(env, g.Env()...)
	}, health
}

// placeCgroups picks the cgroup the sandboxes' cgroups are made under. The
// config's cgroup_parent wins. Without one, a daemon whose systemd unit
// delegates its cgroup v2 subtree (Delegate=yes) puts them in it, as
// <unit>/runs beside its own leaf <unit>/daemon: systemctl status and
// systemd-cgtop then show the runs as the unit's, the unit's limits cover
// them, and stopping the unit kills what is left of them. Anywhere else they
// go under a parent named after the data directory
// (sandbox.DefaultCgroupParent), which no other daemon on the host shares.
func (d *Daemon) placeCgroups(rt *sandbox.Runtime) error {
	if d.cfg.CgroupParent != "" {
		return rt.SetCgroupParent(d.cfg.CgroupParent)
	}
	del, why := sandbox.FindDelegation()
	if why == nil {
		err := rt.UseDelegation(del)
		if err == nil {
			d.log.Info("sandbox cgroups go under the unit's delegated cgroup", "cgroup", rt.CgroupParent(), "daemon_cgroup", del.Leaf)
			return nil
		}
		why = err
	}
	parent := sandbox.DefaultCgroupParent(d.cfg.DataDir)
	if err := rt.SetCgroupParent(parent); err != nil {
		return err
	}
	d.log.Info("sandbox cgroups go under a parent named after the data directory", "cgroup", parent, "why_not_the_unit", why.Error())
	return nil
}
