package appliance

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
)

// Slurm's controller out of reach. An organiser restarting slurmctld, a
// failover to its backup, a network cut between the coordinator and the
// controller: sbatch and squeue fail for a while, and then answer again.
// A run waiting to be submitted holds its place through such an outage,
// for up to slurm.patience, rather than failing as the box's error after
// three quick attempts; /readyz and /metrics say the executor is out of
// reach meanwhile. A refusal (a GRES the partition does not have, an
// account not allowed) is the controller's answer, not an outage: it
// counts the attempt at once, as before.

// unreachableWords are the parts of Slurm's errors (and slurmCmd's own
// timeout) that say the controller did not answer, lowercase.
var unreachableWords = []string{
	"unable to contact slurm controller",    // sbatch, squeue, scancel: connect failure
	"socket timed out on send/recv",         // a controller too busy or cut off mid-call
	"zero bytes were transmitted",           // the connection dropped
	"communication connection failure",      //
	"backup controller in standby",          // a failover in progress
	"temporarily unable to accept job",      // slurmctld busy, or starting
	"transport endpoint is not connected",   //
	"connection refused",                    //
	"munge",                                 // munged down here: no credential for the controller
	"no answer within a minute",             // slurmCmd's own bound
	"slurm_receive_msg: socket timed out",   //
	"unable to establish secure connection", //
}

// looksUnreachable says whether a Slurm command's error is its controller
// out of reach, rather than its answer.
func looksUnreachable(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	for _, w := range unreachableWords {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// controllerReach is what the coordinator knows of the controller's reach
// from the Slurm commands it ran: since when they have failed as an
// unreachable controller's do, and the latest such error.
type controllerReach struct {
	now func() time.Time
	log *slog.Logger

	mu    sync.Mutex
	since time.Time // zero while the controller answers
	last  string
}

func newControllerReach(log *slog.Logger) *controllerReach {
	return &controllerReach{now: time.Now, log: log}
}

// saw records a Slurm command's outcome: any answer, even a refusal, is
// the controller in reach.
func (c *controllerReach) saw(err error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch down := looksUnreachable(err); {
	case down && c.since.IsZero():
		c.since, c.last = c.now(), err.Error()
		c.log.Warn("Slurm's controller is unreachable: runs wait to be submitted", "err", err)
	case down:
		c.last = err.Error()
	case !c.since.IsZero():
		c.log.Info("Slurm's controller answers again", "after", c.now().Sub(c.since).Round(time.Second))
		c.since, c.last = time.Time{}, ""
	}
}

// outage is how long the controller has been out of reach, and its
// latest error; ok is false while it answers.
func (c *controllerReach) outage() (d time.Duration, last string, ok bool) {
	if c == nil {
		return 0, "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since.IsZero() {
		return 0, "", false
	}
	return c.now().Sub(c.since), c.last, true
}

// reasons are the health reasons of an outage (/readyz, /api/health).
func (c *controllerReach) reasons() []string {
	d, last, down := c.outage()
	if !down {
		return nil
	}
	return []string{fmt.Sprintf("the executor is unreachable: Slurm's controller has not answered for %s (runs wait to be submitted): %s",
		d.Round(time.Second), last)}
}

var (
	reachableDesc = prometheus.NewDesc("kernelbox_executor_reachable",
		"1 while the executor's cluster answers (Slurm's controller), 0 while it is out of reach.", []string{"executor"}, nil)
	unreachableDesc = prometheus.NewDesc("kernelbox_executor_unreachable_seconds",
		"How long the executor's cluster has been out of reach (0 while it answers).", []string{"executor"}, nil)
)

// Describe and Collect make the reach a metric.
func (c *controllerReach) Describe(ch chan<- *prometheus.Desc) {
	ch <- reachableDesc
	ch <- unreachableDesc
}

func (c *controllerReach) Collect(ch chan<- prometheus.Metric) {
	d, _, down := c.outage()
	up := 1.0
	if down {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(reachableDesc, prometheus.GaugeValue, up, ExecutorSlurm)
	ch <- prometheus.MustNewConstMetric(unreachableDesc, prometheus.GaugeValue, d.Seconds(), ExecutorSlurm)
}

// submitPatiently runs sbatch until it gives a job id. While the
// controller is out of reach, and for no longer than slurm.patience from
// when it was last seen answering, the run holds its place and sbatch is
// tried again, the wait doubling from five polls to thirty; any other
// failure (or an outage past patience) holds the run for five polls and
// returns the error, counting the attempt. ctx ending stops the wait.
func (s *slurm) submitPatiently(ctx context.Context, g runner.Gang, rc *store.RunContext, token string) (string, error) {
	wait := s.submitBackoff()
	for {
		// sbatch is not interrupted: a job it submitted must be known here
		// to be cancelled (slurmCmd bounds it to a minute).
		id, err := s.submit(context.WithoutCancel(ctx), g, rc, token)
		if err == nil {
			return id, nil
		}
		out, _, down := s.reach.outage()
		patient := looksUnreachable(err) && down && out < s.cfg.Patience
		if !patient {
			wait = s.submitBackoff()
		} else {
			s.tell(g, fmt.Sprintf("waiting for Slurm's controller (unreachable for %s)", out.Round(time.Second)))
			wait = min(wait, s.cfg.Patience-out)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", err
		case <-t.C:
		}
		if !patient {
			return "", err
		}
		wait = min(2*wait, 30*s.cfg.Poll)
	}
}
