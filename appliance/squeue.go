package appliance

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// slurmJob is what squeue says of a job.
type slurmJob struct{ state, reason, node string }

// alive says whether the job is on its way: waiting for resources or a
// scheduler pass, starting, running or ending. Anything else ends the
// attempt: the job ended (COMPLETED without a report, FAILED, NODE_FAIL,
// PREEMPTED, TIMEOUT, CANCELLED by someone else, or gone from Slurm), or
// it waits for what will not come by itself (stuck).
func (j slurmJob) alive() bool {
	switch j.state {
	case "PENDING":
		return !j.stuck()
	case "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT", "REQUEUE_FED":
		return true
	}
	return false
}

// stuck says whether a job still in Slurm waits for an operator (a hold,
// a suspension: a timed run must not be stopped midway) or for what its
// request can never get.
func (j slurmJob) stuck() bool {
	switch j.state {
	case "SUSPENDED", "STOPPED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "SPECIAL_EXIT":
		return true
	case "PENDING":
		switch j.reason {
		case "JobHeldAdmin", "JobHeldUser", "BadConstraints", "PartitionTimeLimit", "PartitionNodeLimit",
			"DependencyNeverSatisfied", "InvalidAccount", "InvalidQOS":
			return true
		}
		return strings.HasSuffix(j.reason, "MaxWallDurationPerJobLimit")
	}
	return false
}

// gone is a job Slurm no longer knows: it ended more than MinJobAge ago,
// or slurmctld lost its state.
var gone = slurmJob{state: "GONE", reason: "Slurm no longer knows the job"}

// jobBoard asks Slurm about every job out in one squeue at a time, however
// many runs wait on it: hundreds of runs out must not mean hundreds of
// squeue calls a poll on slurmctld. A run asks for its job's state each
// poll; an answer younger than fresh that covered the job stands, and
// the runs that look while squeue runs wait for its answer, each only as
// long as its own context lets it (no lock is held across squeue).
type jobBoard struct {
	ask   func(ctx context.Context, ids []string) (map[string]slurmJob, error)
	fresh time.Duration
	now   func() time.Time

	mu      sync.Mutex
	watched map[string]int // job id: how many runs wait on it
	last    *boardAnswer   // the latest squeue, asked or in flight
}

// boardAnswer is one squeue: done closes when its answer is in.
type boardAnswer struct {
	ids  map[string]bool
	done chan struct{}
	// Set before done closes.
	at     time.Time
	jobs   map[string]slurmJob
	err    error
	cutOff bool // its asker's context ended: not Slurm's answer
}

func newJobBoard(ask func(context.Context, []string) (map[string]slurmJob, error), fresh time.Duration) *jobBoard {
	return &jobBoard{ask: ask, fresh: fresh, now: time.Now, watched: map[string]int{}}
}

// watch adds a job to the next squeue; the function returned takes it off.
func (b *jobBoard) watch(id string) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watched[id]++
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.watched[id]--; b.watched[id] <= 0 {
			delete(b.watched, id)
		}
	}
}

// state is what Slurm says of job id: from the latest squeue when it
// covers the job and is fresh or still running, else from a new one for
// every watched job, which this caller runs.
func (b *jobBoard) state(ctx context.Context, id string) (slurmJob, error) {
	a, mine := b.answerFor(id)
	if mine {
		jobs, err := b.ask(ctx, slices.Sorted(maps.Keys(a.ids)))
		b.mu.Lock()
		a.at, a.jobs, a.err, a.cutOff = b.now(), jobs, err, ctx.Err() != nil
		b.mu.Unlock()
		close(a.done)
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return slurmJob{}, ctx.Err()
	}
	if a.err != nil {
		return slurmJob{}, a.err
	}
	if st, ok := a.jobs[id]; ok {
		return st, nil
	}
	return gone, nil
}

// answerFor is the squeue whose answer id may wait for, and whether the
// caller is to run it (a new one).
func (b *jobBoard) answerFor(id string) (*boardAnswer, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a := b.last; a != nil && a.ids[id] {
		select {
		case <-a.done:
			if !a.cutOff && b.now().Sub(a.at) < b.fresh {
				return a, false
			}
		default:
			return a, false // in flight: its answer is the freshest there is
		}
	}
	ids := map[string]bool{id: true}
	for w := range b.watched {
		ids[w] = true
	}
	b.last = &boardAnswer{ids: ids, done: make(chan struct{})}
	return b.last, true
}

// squeue asks Slurm about the jobs ids; a job it does not name is gone.
func (s *slurm) squeue(ctx context.Context, ids []string) (map[string]slurmJob, error) {
	out, err := s.slurmCmd(ctx, "squeue", nil, "--noheader", "--states=all", "--jobs="+strings.Join(ids, ","), "--format=%i|%T|%r|%N")
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") { // older Slurm, when it knows none of them
			return map[string]slurmJob{}, nil
		}
		return nil, err
	}
	return parseSqueue(out), nil
}

// parseSqueue reads squeue's id|state|reason|node lines.
func parseSqueue(out string) map[string]slurmJob {
	jobs := map[string]slurmJob{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(strings.TrimSpace(line), "|", 4)
		if len(f) < 2 || f[0] == "" {
			continue
		}
		for len(f) < 4 {
			f = append(f, "")
		}
		if f[3] == "(null)" { // squeue's word for a job not placed yet
			f[3] = ""
		}
		jobs[f[0]] = slurmJob{state: f[1], reason: f[2], node: f[3]}
	}
	return jobs
}
