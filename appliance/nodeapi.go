package appliance

import (
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"kernelbox/appliance/api"
)

// The node API: what a Slurm node's `kernelbox node run-job` calls. Its
// credential is the run's job token, made for one attempt and forgotten
// when the attempt ends, so a node that comes back late (its job given up
// and tried again elsewhere) is refused and cannot overwrite anything.

// nodeRuns are the runs out on nodes, by run id.
type nodeRuns struct {
	mu   sync.Mutex
	runs map[int64]*nodeRun
}

// nodeRun is one attempt of a run out on a node.
type nodeRun struct {
	job   api.NodeJob
	token string
	// result takes the node's one report (its one place: a second
	// finds it full).
	result chan api.NodeResult
}

func newNodeRuns() *nodeRuns { return &nodeRuns{runs: map[int64]*nodeRun{}} }

func (n *nodeRuns) add(job api.NodeJob, token string) *nodeRun {
	nr := &nodeRun{job: job, token: token, result: make(chan api.NodeResult, 1)}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.runs[job.Run] = nr
	return nr
}

func (n *nodeRuns) remove(nr *nodeRun) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.runs[nr.job.Run] == nr {
		delete(n.runs, nr.job.Run)
	}
}

// auth finds the run a request is for and checks its token.
func (n *nodeRuns) auth(r *http.Request) (*nodeRun, error) {
	if n == nil {
		return nil, api.Errorf(api.CodeNotFound, "this box runs no Slurm jobs (executor: local)")
	}
	id, err := strconv.ParseInt(r.PathValue("run"), 10, 64)
	if err != nil || id <= 0 {
		return nil, api.Errorf(api.CodeInvalid, "run %q is not a positive number", r.PathValue("run"))
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	n.mu.Lock()
	nr := n.runs[id]
	n.mu.Unlock()
	// One answer for both: a wrong token must not learn which runs are out.
	if nr == nil || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(nr.token)) != 1 {
		return nil, api.Errorf(api.CodeUnauthorized, "no run %d is out on a node with this job token (given up, or ended)", id)
	}
	return nr, nil
}

func (a *API) nodeJob(w http.ResponseWriter, r *http.Request) error {
	nr, err := a.svc.nodeRuns.auth(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, nr.job)
}

// nodeAttempt answers a node that asks whether its attempt still stands:
// its token's check is the answer.
func (a *API) nodeAttempt(w http.ResponseWriter, r *http.Request) error {
	if _, err := a.svc.nodeRuns.auth(r); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}

func (a *API) nodeEvent(w http.ResponseWriter, r *http.Request) error {
	nr, err := a.svc.nodeRuns.auth(r)
	if err != nil {
		return err
	}
	var ev api.NodeEvent
	if err := decodeJSONUpTo(r, w, &ev, maxJSONBody*16); err != nil {
		return err
	}
	p, err := nodeEventPayload(nr.job, ev)
	if err != nil {
		return err
	}
	if p != nil {
		if err := a.svc.store.AppendEvent(r.Context(), nr.job.Submission, p); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}

// nodeEventPayload is a node's event as the submission's log takes it,
// or nil for one it must not get: a secret run's cases carry its seed.
func nodeEventPayload(job api.NodeJob, ev api.NodeEvent) (api.Payload, error) {
	switch {
	case ev.Test != nil && ev.Phase == nil:
		if job.Secret {
			return nil, nil
		}
		ev.Test.Run = job.Run
		return *ev.Test, nil
	case ev.Phase != nil && ev.Test == nil:
		ev.Phase.Run, ev.Phase.Secret = job.Run, job.Secret
		return *ev.Phase, nil
	}
	return nil, api.Errorf(api.CodeInvalid, "a node event holds one of test and phase")
}

func (a *API) nodeResult(w http.ResponseWriter, r *http.Request) error {
	nr, err := a.svc.nodeRuns.auth(r)
	if err != nil {
		return err
	}
	var res api.NodeResult
	// A report holds the run's output and its Nsight Compute report.
	limit := maxNodeResult(int64(a.svc.cfg.Profiler.MaxReport))
	if err := decodeJSONUpTo(r, w, &res, limit); err != nil {
		return err
	}
	if res.Error == "" && res.Report == nil {
		return api.Errorf(api.CodeInvalid, "a node's result holds a report or an error")
	}
	select {
	case nr.result <- res:
	default:
		return api.Errorf(api.CodeConflict, "run %d was reported already", nr.job.Run)
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}
