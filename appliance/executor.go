package appliance

import (
	"context"

	"kernelbox/appliance/store"
)

// An executor carries out one run on a gang of slots and returns what it
// left: the harness's report and the GPUs' readings. The runner around it
// owns the rest of a job's life (the lease and its heartbeat, judging the
// execution, recording the result), so every executor's runs are judged
// and stored alike.
//
// The local executor runs the harness in this box's sandbox on the
// gang's own GPUs (or CPUs); the slurm executor (slurm.go) has a node of a
// Slurm cluster do the same with `kernelbox node run-job`, and waits for
// its report. A Kubernetes executor would fit the same place: a Job per
// run, its Pod running `kernelbox node run-job` (docs/scale-out.md).
//
// execute returns an error for the box's failures only (the run is tried
// again); ctx ends when the lease is lost or the daemon stops, and the
// execution must then stop. take, when set, is a warm start's wait for
// its slot (warm.go); only the local executor starts runs warm.
type executor interface {
	execute(ctx context.Context, g gang, rc *store.RunContext, take func(context.Context) error) (*execution, error)
}

// local is the executor of this box's own slots.
type local struct{ r *runner }

func (l local) execute(ctx context.Context, g gang, rc *store.RunContext, take func(context.Context) error) (*execution, error) {
	return l.r.execute(ctx, g, rc, take)
}

func (r *runner) executor() executor {
	if r.exec != nil {
		return r.exec
	}
	return local{r}
}
