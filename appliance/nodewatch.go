package appliance

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"kernelbox/appliance/api"
)

// A node's attempt can be given up while the node runs on: cut off from
// slurmctld for longer than SlurmdTimeout, the node is NODE_FAIL to
// Slurm and its job ended, so the coordinator tries the run again
// elsewhere and forgets the attempt's token. scancel cannot reach a job
// Slurm counts as ended, so the node asks instead: every CheckEvery (the
// coordinator's five polls) it asks whether its attempt still stands,
// and once the answer is no it stops, its sandboxes with it, as on
// scancel. It asks as soon as it can reach the coordinator again: at
// once for a job Slurm gave up over a cut in Slurm's own network, when
// the cut heals for one that took the coordinator's API with it.

// errSuperseded is why a node's run stops when its attempt was given up.
var errSuperseded = errors.New("the coordinator gave this attempt up (tried again elsewhere)")

// standing says whether the node's attempt still stands; an error is a
// failure to ask, which says nothing either way.
func (l *apiLink) standing(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := l.c.NodeAttempt(ctx, l.run)
	if api.ErrorCode(err) == api.CodeUnauthorized {
		return false, nil
	}
	return err == nil, err
}

// standing: the attempt's directory goes when the coordinator ends it.
func (l *spoolLink) standing(context.Context) (bool, error) {
	_, err := os.Stat(filepath.Join(l.dir, spoolJobFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// watchAttempt asks link every interval whether the attempt still stands
// and cancels the run with errSuperseded once it does not. The function
// returned stops the watch and waits for it.
func watchAttempt(ctx context.Context, link nodeLink, every time.Duration, cancel context.CancelCauseFunc, log *slog.Logger) func() {
	if every <= 0 { // a coordinator that does not ask for it
		return func() {}
	}
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ok, err := link.standing(ctx)
			switch {
			case err != nil:
				if !failing && ctx.Err() == nil {
					log.Warn("ask the coordinator whether this attempt still stands", "err", err)
				}
				failing = true
			case !ok:
				log.Warn("the coordinator gave this attempt up: stopping the run")
				cancel(errSuperseded)
				return
			default:
				failing = false
			}
		}
	}()
	return func() {
		stop()
		wg.Wait()
	}
}
