package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/popcorn"
	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
	"kernelbox/appliance/web"
)

// API is the HTTP interface of the daemon: JSON over TCP and the unix
// socket, bearer-token auth, one error model (httpStatus).
type API struct {
	svc *Service
	log *slog.Logger
	// maxWait bounds a long-poll; tests shorten it.
	maxWait time.Duration
	// stopping is closed at shutdown: waiting long-polls answer at once, so
	// the HTTP shutdown does not wait out their 30 seconds.
	stopping  chan struct{}
	closeOnce sync.Once
	web       http.Handler
}

func newAPI(svc *Service, log *slog.Logger) (*API, error) {
	pages, err := web.New(svc, svc, log, svc.cfg.MaxUploadBytes)
	if err != nil {
		return nil, err
	}
	return &API{svc: svc, log: log, maxWait: 30 * time.Second, stopping: make(chan struct{}), web: pages.Routes()}, nil
}

// stop releases the waiting long-polls.
func (a *API) stop() { a.closeOnce.Do(func() { close(a.stopping) }) }

// maxJSONBody caps every JSON request body.
const maxJSONBody = 64 << 10

type userKey struct{}

// handlerFunc is a handler that returns its error, so that every error
// goes through writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handler routes the API.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	open := func(pattern string, h handlerFunc) { mux.Handle(pattern, a.wrap(h, false, false)) }
	user := func(pattern string, h handlerFunc) { mux.Handle(pattern, a.wrap(h, true, false)) }
	staff := func(pattern string, h handlerFunc) { mux.Handle(pattern, a.wrap(h, true, true)) }

	open("GET /api/health", a.health)
	open("GET /healthz", a.healthz)
	open("GET /readyz", a.readyz)
	if a.svc.cfg.Metrics {
		// Registered once per service: a second Handler (tests make two)
		// finds it there already.
		_ = a.svc.metrics.reg.Register(newStateCollector(a.svc, func(ctx context.Context) bool { return a.healthNow(ctx).Status == "ok" }))
		mux.Handle("GET /metrics", a.svc.metrics.handler())
	}
	mux.Handle("GET /download/{file...}", a.wrap(a.download, false, false))
	// Slurm nodes, with a run's job token (nodeapi.go).
	open("GET /api/node/runs/{run}", a.nodeJob)
	open("POST /api/node/runs/{run}/events", a.nodeEvent)
	open("POST /api/node/runs/{run}/result", a.nodeResult)
	open("GET /api/node/runs/{run}/attempt", a.nodeAttempt)
	open("POST /api/register", a.register)
	user("GET /api/me", a.me)
	user("POST /api/join", a.join)
	user("GET /api/leaderboards", a.leaderboards)
	user("GET /api/leaderboards/{name}", a.leaderboard)
	user("GET /api/leaderboards/{name}/ranking", a.ranking)
	user("GET /api/leaderboards/{name}/entries/{id}", a.entry)
	user("GET /api/leaderboards/{name}/templates/{key}", a.template)
	user("POST /api/submissions", a.submit)
	user("GET /api/submissions", a.submissions)
	user("GET /api/submissions/{id}", a.submission)
	user("GET /api/submissions/{id}/events", a.events)
	user("POST /api/submissions/{id}/cancel", a.cancel)
	user("DELETE /api/submissions/{id}", a.deleteSubmission)
	user("GET /api/submissions/{id}/profile", a.profile)
	user("GET /api/queue", a.queueStatus)
	user("GET /api/gpus", a.gpus)
	staff("GET /api/admin/users", a.adminUsers)
	staff("POST /api/admin/users", a.adminAddUser)
	staff("POST /api/admin/users/{name}/ban", a.adminBan)
	staff("POST /api/admin/users/{name}/tokens", a.adminToken)
	staff("POST /api/admin/invites", a.adminInvite)
	staff("GET /api/admin/invites", a.adminInvites)
	staff("GET /api/admin/stats", a.adminStats)
	staff("DELETE /api/admin/invites/{id}", a.adminRevokeInvite)
	staff("POST /api/admin/problems", a.adminProblems)
	staff("PATCH /api/admin/leaderboards/{name}", a.adminLeaderboard)
	staff("DELETE /api/admin/leaderboards/{name}", a.adminDeleteLeaderboard)
	staff("POST /api/admin/submissions/{id}/hacked", a.adminHacked)
	staff("GET /api/admin/review", a.adminFlagged)
	staff("POST /api/admin/submissions/{id}/review", a.adminReview)
	staff("DELETE /api/admin/submissions/{id}", a.adminDelete)
	staff("POST /api/admin/gpus/{id}/drain", a.adminDrain)
	staff("POST /api/admin/gpus/{id}/undrain", a.adminUndrain)
	staff("POST /api/admin/queue/pause", a.adminPause)
	staff("POST /api/admin/queue/resume", a.adminResume)
	// Admin only (checked in the handlers): every token hash, everybody's code.
	staff("GET /api/admin/backup", a.adminBackup)
	staff("GET /api/admin/export", a.adminExport)
	// popcorn-cli's protocol, for POPCORN_API_URL=http://BOX/popcorn; its
	// own errors are popcorn's {"detail": ...}, the body timeout ours.
	pc := http.StripPrefix("/popcorn", popcorn.New(a.svc, a.log, a.svc.cfg.MaxUploadBytes, a.stopping).Routes())
	mux.Handle("/popcorn/", a.wrap(func(w http.ResponseWriter, r *http.Request) error {
		pc.ServeHTTP(w, r)
		return nil
	}, false, false))
	mux.Handle("/api/", a.wrap(func(w http.ResponseWriter, r *http.Request) error {
		return api.Errorf(api.CodeNotFound, "no such endpoint: %s %s (docs/api.md lists them)", r.Method, r.URL.Path)
	}, false, false))
	// The pages for a browser, on the same service calls as the API.
	mux.Handle("/", a.wrap(func(w http.ResponseWriter, r *http.Request) error {
		a.web.ServeHTTP(w, r) // the pages answer their own errors; wrap adds the body's deadline
		return nil
	}, false, false))
	return a.svc.metrics.instrument(mux)
}

func (a *API) wrap(h handlerFunc, auth, staffOnly bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A body that trickles in holds its connection for body_timeout at
		// most. Recorders in tests do not support deadlines: no matter.
		if r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Now().Add(a.svc.cfg.BodyTimeout))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, timeout: a.svc.cfg.BodyTimeout}
		}
		if auth {
			token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			u, err := a.svc.Authenticate(r.Context(), strings.TrimSpace(token))
			if err != nil {
				a.writeError(w, r, err)
				return
			}
			if staffOnly && !u.Role.Staff() {
				a.writeError(w, r, api.Errorf(api.CodeForbidden, "%s is a %s; this needs an organiser or admin", u.Name, u.Role))
				return
			}
			// A ban holds on every front: a banned user still signs in, to
			// read why and what it has, but neither acts nor uses a staff
			// power (which would let a banned organiser lift its own ban).
			if u.Banned && (staffOnly || r.Method != http.MethodGet) {
				a.writeError(w, r, api.Errorf(api.CodeForbidden, "user %s is banned: it can read, not act; ask an organiser", u.Name))
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
		}
		if err := h(w, r); err != nil {
			a.writeError(w, r, err)
		}
	})
}

// deadlineBody lifts the body's read deadline once the body is read (a
// handler that then works or waits a long time is not cut off by it), and
// turns the deadline's passing into the client's error, whichever reader
// (JSON, file, archive) meets it.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	done    bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF && !b.done:
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = api.Errorf(api.CodeInvalid, "the request body did not arrive within %s (body_timeout)", b.timeout)
	}
	return n, err
}

func userOf(r *http.Request) *store.User { return r.Context().Value(userKey{}).(*store.User) }

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeError is the one place an error becomes a response. Errors without
// a code are the server's own: the client gets "internal", the log the rest.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := api.ErrorCode(err)
	msg := err.Error()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		code, msg = api.CodeTooLarge, fmt.Sprintf("the request body is over the %d-byte limit", mbe.Limit)
	}
	if code == api.CodeInternal && diskFull(err) {
		a.log.Error("the disk is full", "method", r.Method, "path", r.URL.Path, "err", err)
		code, msg = api.CodeStorageFull, errDiskFull().Error()
	}
	if code == api.CodeInternal {
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "internal error; the server's log has the details"
	}
	_ = writeJSON(w, api.HTTPStatus(code), api.ErrorBody{Error: &api.Error{Code: code, Message: msg}})
}

func decodeJSON(r *http.Request, w http.ResponseWriter, v any) error {
	return decodeJSONUpTo(r, w, v, maxJSONBody)
}

// decodeJSONUpTo is decodeJSON for a body that may be larger (a Slurm
// node's report carries the run's output and its profile); a body over
// limit is writeError's too_large.
func decodeJSONUpTo(r *http.Request, w http.ResponseWriter, v any, limit int64) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return api.Errorf(api.CodeInvalid, "the request body is not the JSON this endpoint takes: %v", err)
	}
	// One document: anything after it is a client's mistake (two bodies
	// glued together, a truncated edit), never silently dropped.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return api.Errorf(api.CodeInvalid, "the request body has more after its JSON document")
	}
	return nil
}

func (a *API) health(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, a.healthNow(r.Context()))
}

// healthz is the liveness probe (systemd, a load balancer, Kubernetes):
// the daemon answers HTTP. It says nothing about evaluating.
func (a *API) healthz(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err := io.WriteString(w, "ok\n")
	return err
}

// readyz is the readiness probe: 200 while the box can take and evaluate
// submissions, 503 with the reasons (one a line) while it is degraded
// (no runner, a full disk, a problem that does not load) or shutting
// down, so a balancer stops sending work without parsing /api/health.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) error {
	h := a.healthNow(r.Context())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if h.Status != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, err := io.WriteString(w, h.Status+"\n"+strings.Join(h.Reasons, "\n")+"\n")
		return err
	}
	_, err := io.WriteString(w, "ready\n")
	return err
}

// healthNow is the box's health as GET /api/health reports it.
func (a *API) healthNow(ctx context.Context) api.Health {
	// Clipped: the appends below must not write into the service's slice.
	h := api.Health{Status: "ok", Version: a.svc.cfg.Version, GPUs: map[string]int{}, Reasons: slices.Clip(a.svc.health)}
	if disk := a.svc.diskProblem(); disk != "" {
		h.Reasons = append(h.Reasons, disk)
	}
	h.Reasons = append(h.Reasons, a.svc.problemTrouble(ctx)...)
	if a.svc.executorTrouble != nil {
		h.Reasons = append(h.Reasons, a.svc.executorTrouble()...)
	}
	h.Canaries = a.svc.canary.List()
	h.Reasons = append(h.Reasons, runner.CanaryReasons(h.Canaries)...)
	if len(h.Reasons) > 0 {
		h.Status = "degraded"
	}
	if a.svc.draining.Load() {
		h.Status, h.Reasons = "draining", append(h.Reasons, "shutting down")
	}
	for _, g := range a.svc.gpuTypes() {
		h.GPUs[g] = a.svc.slotCount(g)
	}
	return h
}

func (a *API) register(w http.ResponseWriter, r *http.Request) error {
	var req api.RegisterRequest
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	cr, err := a.svc.Register(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, cr)
}

func (a *API) me(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, userOf(r).User)
}

func (a *API) join(w http.ResponseWriter, r *http.Request) error {
	var req api.JoinRequest
	if err := decodeJSON(r, w, &req); err != nil {
		return err
	}
	joined, err := a.svc.Join(r.Context(), userOf(r), req.Invite)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, joined)
}

func (a *API) leaderboards(w http.ResponseWriter, r *http.Request) error {
	lbs, err := a.svc.Leaderboards(r.Context(), userOf(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, lbs)
}

func (a *API) leaderboard(w http.ResponseWriter, r *http.Request) error {
	li, err := a.svc.Leaderboard(r.Context(), userOf(r), r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, li)
}

func (a *API) ranking(w http.ResponseWriter, r *http.Request) error {
	rk, err := a.svc.Ranking(r.Context(), userOf(r), r.PathValue("name"), r.URL.Query().Get("gpu"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, rk)
}

func (a *API) entry(w http.ResponseWriter, r *http.Request) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	e, err := a.svc.Entry(r.Context(), userOf(r), r.PathValue("name"), id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, e)
}

func (a *API) template(w http.ResponseWriter, r *http.Request) error {
	name, data, err := a.svc.Template(r.Context(), userOf(r), r.PathValue("name"), r.PathValue("key"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	_, err = w.Write(data)
	return err
}

func (a *API) submit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	// The body is the file itself, not JSON: JSON would turn bytes that
	// are not UTF-8 into U+FFFD instead of letting us refuse them.
	code, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.svc.cfg.MaxUploadBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return api.Errorf(api.CodeTooLarge, "the file is over the %d-byte limit", a.svc.cfg.MaxUploadBytes)
		}
		return api.Errorf(api.CodeInvalid, "read the file: %v", err)
	}
	mode := q.Get("mode")
	if mode == "" {
		mode = "test"
	}
	sub, err := a.svc.Submit(r.Context(), userOf(r), api.SubmitRequest{Leaderboard: q.Get("leaderboard"), GPU: q.Get("gpu"),
		Mode: mode, FileName: q.Get("file_name"), Code: code})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, sub.Submission)
}

func (a *API) submissions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	sq := SubmissionQuery{Leaderboard: q.Get("leaderboard"), Status: q.Get("status"), User: q.Get("user"), All: q.Get("all") == "1"}
	if n := q.Get("limit"); n != "" {
		var err error
		if sq.Limit, err = strconv.Atoi(n); err != nil || sq.Limit < 1 {
			return api.Errorf(api.CodeInvalid, "limit %q is not a positive number", n)
		}
	}
	subs, err := a.svc.Submissions(r.Context(), userOf(r), sq)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, subs)
}

func (a *API) submission(w http.ResponseWriter, r *http.Request) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	v, err := a.svc.SubmissionView(r.Context(), userOf(r), id, r.URL.Query().Get("code") == "1")
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

// redact hides a secret run's details from contestants: its cases and
// messages would reveal the secret inputs.
func redact(sub *store.Submission, u *store.User) {
	if u.Role.Staff() {
		return
	}
	for i := range sub.Runs {
		if sub.Runs[i].Secret {
			sub.Runs[i].Report, sub.Runs[i].SystemInfo = nil, nil
			if !sub.Runs[i].Passed && sub.Runs[i].Reason != "" {
				sub.Runs[i].Reason = "the secret-seed run failed"
			}
		}
	}
}

// events is the long-poll: it answers at once when there are events after
// the cursor, else waits for the next change up to wait (30 s at most).
// A waiting request holds no worker and no timer per job: it sleeps on the
// store's channel for that submission.
func (a *API) events(w http.ResponseWriter, r *http.Request) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	u := userOf(r)
	if _, err := a.svc.visibleSubmission(r.Context(), u, id); err != nil {
		return err
	}
	q := r.URL.Query()
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	wait := a.maxWait
	if s := q.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return api.Errorf(api.CodeInvalid, "wait %q is not a duration like 25s", s)
		}
		wait = min(d, a.maxWait)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed, release := a.svc.Changed(id)
		page, waiting, err := a.svc.EventsPage(r.Context(), id, after)
		if err != nil || !waiting {
			release()
			if err != nil {
				return err
			}
			return writeJSON(w, http.StatusOK, page)
		}
		select {
		case <-changed:
			release()
		case <-deadline.C:
			release()
			return writeJSON(w, http.StatusOK, page)
		case <-a.stopping:
			release()
			return writeJSON(w, http.StatusOK, page)
		case <-r.Context().Done():
			release()
			return nil
		}
	}
}

func (a *API) cancel(w http.ResponseWriter, r *http.Request) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	sub, err := a.svc.Cancel(r.Context(), userOf(r), id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sub.Submission)
}

func (a *API) deleteSubmission(w http.ResponseWriter, r *http.Request) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	if err := a.svc.DeleteMySubmission(r.Context(), userOf(r), id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.Deleted{Deleted: id})
}

func (a *API) gpus(w http.ResponseWriter, r *http.Request) error {
	st, err := a.svc.GPUs()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

func (a *API) queueStatus(w http.ResponseWriter, r *http.Request) error {
	st, err := a.svc.Queue(r.Context(), userOf(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}
