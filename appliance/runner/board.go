package runner

// The slots as the daemon's service sees them: their states, drains, and
// the health check that drains a GPU after a job.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"kernelbox/appliance/api"
	"kernelbox/gpu"
)

// Board is the running runner's slots as the service sees them: the
// box's inventory with each slot's state, and drains.
type Board struct {
	r   *Runner
	inv api.GPUsStatus // without Slots
}

// Board is the runner's slots with inv, the box's inventory.
func (r *Runner) Board(inv api.GPUsStatus) Board { return Board{r: r, inv: inv} }

// Status is the inventory and what each slot is doing.
func (b Board) Status() api.GPUsStatus {
	st := b.inv
	st.Slots = b.r.states()
	return st
}

// Drain stops a slot from taking jobs, saying why.
func (b Board) Drain(id, why string) error { return b.r.drain(id, why) }

// Undrain lets a drained slot take jobs again.
func (b Board) Undrain(id string) error { return b.r.undrain(id) }

// states reports each slot and what it is doing, as `kernelbox gpus`
// shows it.
func (r *Runner) states() []api.SlotState {
	out := []api.SlotState{}
	remote, _ := r.exec.(Remoter) // where an executor sends runs away
	for _, s := range r.slots {
		st := api.SlotState{ID: s.ID, GPUType: s.GPUType, Device: s.Device, Cpuset: s.Cpuset, Clocks: s.Clocks,
			GPU: wireGPU(s.GPU), State: "idle"}
		if why, ok := r.drained.Load(s.ID); ok {
			st.State, st.Drained = "drained", why.(string)
		}
		if j, ok := r.busy.Load(s.ID); ok {
			st.State, st.Job = "running", j.(int64)
			if st.Job == canaryJob {
				st.State = "canary"
			}
		}
		if remote != nil {
			st.Remote = remote.Remote(s.ID)
		}
		if r.measured(s) {
			if t, err := r.monitor.Read(s.GPU.UUID); err == nil {
				st.Now = &api.Telemetry{At: t.At, TempC: t.TempC, SMClockMHz: t.SMClockMHz, PowerMW: t.PowerMW,
					Reasons: t.Reasons, MemUsed: t.MemUsed, Processes: t.Processes}
			}
		}
		out = append(out, st)
	}
	return out
}

// wireGPU is what the API shows of a GPU: not its device nodes or /proc
// directory, which are the sandbox's business.
func wireGPU(g *gpu.GPU) *api.GPU {
	if g == nil {
		return nil
	}
	return &api.GPU{Index: g.Index, UUID: g.UUID, Name: g.Name, Type: g.Type, Vendor: string(g.Vendor), Memory: g.Memory,
		PCI: g.PCI, NUMANode: g.NUMANode, CPUs: g.CPUs, Parent: g.Parent, Links: g.Links}
}

// measured says whether the slot's runs are gated, sampled and checked.
// A MIG instance is not: its clocks, heat and power are its parent's,
// shared with its siblings' runs, and NVML answers them for the parent.
func (r *Runner) measured(s Slot) bool {
	return s.GPU != nil && s.GPU.Parent == "" && r.monitor != nil
}

// checkHealth looks at a GPU after a job: every process of the run gone and
// its memory back at the idle baseline, within a short wait, and no
// hardware trouble (Xid, ECC, row remapping; gpu.Monitor.Health). A GPU that
// does not come back is drained: the jobs of its type go to the others,
// and an operator looks (`kernelbox gpus`, `kernelbox admin gpu undrain`).
func (r *Runner) checkHealth(log *slog.Logger, slot Slot, job int64) {
	if problems := r.HealthProblems(r.hard, log, slot); len(problems) > 0 {
		why := fmt.Sprintf("unhealthy after job %d: %s", job, strings.Join(problems, "; "))
		r.drained.Store(slot.ID, why)
		log.Error("GPU drained", "why", why)
		if err := r.store.SetDrain(context.WithoutCancel(r.hard), slot.ID, why); err != nil {
			log.Error("record the drain: a restart would put the GPU back in service", "err", err)
		}
	}
}

// HealthProblems are what is wrong with a measured slot's GPU after a
// job, after a wait for the run's processes and memory to go; none once
// ctx ends.
func (r *Runner) HealthProblems(ctx context.Context, log *slog.Logger, slot Slot) []string {
	if !r.measured(slot) || ctx.Err() != nil {
		return nil
	}
	cfg := r.cfg.Measure.gateConfig()
	cfg.MaxTempC, cfg.ThrottleMask, cfg.Wait = 0, 0, r.cfg.Measure.HealthWait
	var problems []string
	if _, err := r.monitor.Gate(ctx, slot.GPU.UUID, cfg); err != nil && ctx.Err() == nil {
		problems = append(problems, err.Error())
	}
	if hw, err := r.monitor.Health(slot.GPU.UUID); err != nil {
		log.Warn("GPU health", "err", err)
	} else {
		problems = append(problems, hw...)
	}
	return problems
}

// restoreDrains takes the slots drained before the last stop out of
// service again; a recorded slot this box no longer has is only logged.
func (r *Runner) restoreDrains(ctx context.Context) error {
	drains, err := r.store.Drains(ctx)
	if err != nil {
		return err
	}
	for id, why := range drains {
		if r.hasSlot(id) != nil {
			r.log.Warn("a drained GPU is not on this box now", logSlot, id, "why", why)
			continue
		}
		r.drained.Store(id, why)
		r.log.Warn("GPU still drained (kernelbox admin gpu undrain puts it back)", logSlot, id, "why", why)
	}
	return nil
}

// drain stops a slot from taking jobs; undrain lets it again. Both are
// recorded first, so a restart keeps what the operator decided.
func (r *Runner) drain(id, why string) error {
	if err := r.hasSlot(id); err != nil {
		return err
	}
	if why == "" {
		why = "drained by an operator"
	}
	if err := r.store.SetDrain(r.hard, id, why); err != nil {
		return err
	}
	r.drained.Store(id, why)
	r.log.Warn("GPU drained", logSlot, id, "why", why)
	return nil
}

func (r *Runner) undrain(id string) error {
	if err := r.hasSlot(id); err != nil {
		return err
	}
	if err := r.store.SetDrain(r.hard, id, ""); err != nil {
		return err
	}
	r.drained.Delete(id)
	r.log.Info("GPU undrained", logSlot, id)
	r.wake.Fire()
	return nil
}

func (r *Runner) hasSlot(id string) error {
	for _, s := range r.slots {
		if s.ID == id {
			return nil
		}
	}
	return api.Errorf(api.CodeNotFound, "no slot %s (`kernelbox gpus` lists them)", id)
}

// Busy says whether slot runs a job (or the canary) now.
func (r *Runner) Busy(slot string) bool {
	_, busy := r.busy.Load(slot)
	return busy
}
