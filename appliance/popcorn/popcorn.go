// Package popcorn serves the HTTP protocol of GPU MODE's popcorn-cli
// (KernelBot's API, docs/interop/popcorn-protocol.md) beside kernelbox's
// own, so that contestants who already use that tool can submit to a box
// by pointing POPCORN_API_URL at http://BOX/popcorn. It is a translation
// only: every decision (who may submit, where, what passed, the scores)
// is the service's, reached through the Service interface.
//
// Identity: popcorn's X-Popcorn-Cli-Id header carries a kernelbox API
// token, written into ~/.popcorn.yaml as cli_id. popcorn's own
// registration goes through Discord or GitHub OAuth on GPU MODE's host,
// which a box cannot take part in, so GET /auth/init says how to get a
// token instead.
package popcorn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// Service is what the protocol needs of the daemon.
type Service interface {
	Authenticate(ctx context.Context, token string) (*store.User, error)
	Leaderboards(ctx context.Context, u *store.User) ([]api.LeaderboardInfo, error)
	Leaderboard(ctx context.Context, u *store.User, name string) (api.LeaderboardInfo, error)
	Submit(ctx context.Context, u *store.User, req api.SubmitRequest) (*store.Submission, error)
	// MySubmissions lists u's own submissions, newest first.
	MySubmissions(ctx context.Context, u *store.User, leaderboard string, limit int) ([]api.Submission, error)
	SubmissionView(ctx context.Context, u *store.User, id int64, withCode bool) (api.SubmissionView, error)
	// DeleteMySubmission removes one of u's submissions (staff: anyone's).
	DeleteMySubmission(ctx context.Context, u *store.User, id int64) error
	Join(ctx context.Context, u *store.User, invite string) (api.Joined, error)
	Queue(ctx context.Context, u *store.User) (*api.QueueStatus, error)
	// Changed returns a channel closed at the submission's next event.
	Changed(subID int64) (<-chan struct{}, func())
}

// Handler serves the protocol; mount it under a prefix with
// http.StripPrefix.
type Handler struct {
	svc      Service
	log      *slog.Logger
	maxBytes int64
	// stopping is closed at shutdown, so that open streams end at once.
	stopping <-chan struct{}
	// heartbeat is how often a stream says it is still working: popcorn
	// expects a status event at least every ~15 s.
	heartbeat time.Duration
}

// New returns the protocol's handler: uploads up to maxBytes, streams
// that end when stopping is closed.
func New(svc Service, log *slog.Logger, maxBytes int64, stopping <-chan struct{}) *Handler {
	return &Handler{svc: svc, log: log, maxBytes: maxBytes, stopping: stopping, heartbeat: 15 * time.Second}
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, u *store.User) error

// Routes returns the protocol's routes, relative to its prefix.
func (h *Handler) Routes() http.Handler {
	mux := http.NewServeMux()
	user := func(pattern string, f handlerFunc) { mux.Handle(pattern, h.wrap(f, true)) }
	open := func(pattern string, f handlerFunc) { mux.Handle(pattern, h.wrap(f, false)) }
	open("GET /auth/init", h.authInit)
	user("GET /leaderboards", h.leaderboards)
	user("GET /gpus/{lb}", h.gpus)
	user("POST /submission/{lb}/{gpu}/{mode}", h.submitBackground)
	user("POST /{lb}/{gpu}/{mode}", h.submitStreaming)
	user("GET /user/submissions", h.submissions)
	user("GET /user/submissions/{id}", h.submission)
	user("DELETE /user/submissions/{id}", h.deleteSubmission)
	user("POST /user/join", h.join)
	open("/", func(w http.ResponseWriter, r *http.Request, _ *store.User) error {
		return api.Errorf(api.CodeNotFound, "kernelbox does not serve %s %s of popcorn's protocol (docs/popcorn.md lists what it does)", r.Method, r.URL.Path)
	})
	return mux
}

// wrap authenticates (popcorn's header carries a kernelbox token) and
// turns errors into popcorn's {"detail": ...} bodies.
func (h *Handler) wrap(f handlerFunc, auth bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u *store.User
		if auth {
			id := strings.TrimSpace(r.Header.Get("X-Popcorn-Cli-Id"))
			if id == "" {
				writeDetail(w, http.StatusBadRequest, "Missing X-Popcorn-Cli-Id header: put a kernelbox token in ~/.popcorn.yaml as cli_id")
				return
			}
			var err error
			if u, err = h.svc.Authenticate(r.Context(), id); err != nil {
				h.writeError(w, r, err)
				return
			}
			if u.Banned && r.Method != http.MethodGet {
				writeDetail(w, http.StatusForbidden, "You are banned from making submissions.")
				return
			}
		}
		if err := f(w, r, u); err != nil {
			h.writeError(w, r, err)
		}
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	_ = writeJSON(w, status, map[string]string{"detail": detail})
}

// writeError answers an error as FastAPI does, which popcorn prints:
// {"detail": message}, with kernelbox's status for its code.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := api.ErrorCode(err), err.Error()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		code, msg = api.CodeTooLarge, fmt.Sprintf("the request body is over the %d-byte limit", mbe.Limit)
	}
	if code == api.CodeInternal {
		h.log.Error("popcorn request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "internal error; the server's log has the details"
	}
	writeDetail(w, api.HTTPStatus(code), msg)
}

func (h *Handler) authInit(w http.ResponseWriter, r *http.Request, _ *store.User) error {
	writeDetail(w, http.StatusForbidden, "this is a kernelbox server: it does not take part in popcorn's Discord or GitHub sign-in. "+
		"Get a token from the organiser (or run `kernelbox register --invite CODE --name NAME`), then write it to ~/.popcorn.yaml as: cli_id: TOKEN")
	return nil
}

func (h *Handler) leaderboards(w http.ResponseWriter, r *http.Request, u *store.User) error {
	lbs, err := h.svc.Leaderboards(r.Context(), u)
	if err != nil {
		return err
	}
	out := make([]leaderboard, len(lbs))
	for i, lb := range lbs {
		out[i] = wireLeaderboard(lb)
	}
	return writeJSON(w, http.StatusOK, out)
}

func (h *Handler) gpus(w http.ResponseWriter, r *http.Request, u *store.User) error {
	lb, err := h.svc.Leaderboard(r.Context(), u, h.resolve(r.Context(), u, r.PathValue("lb")))
	if err != nil {
		return err
	}
	// The types this box runs it on now: popcorn offers them to pick from
	// and puts the pick in the submit URL.
	return writeJSON(w, http.StatusOK, nonNil(lb.Available))
}

// resolve finds the leaderboard a URL names: popcorn lowercases the name
// it puts there, and a box's names may have capitals. A name that matches
// none, or more than one, is passed on as it came, for the service to
// refuse by name.
func (h *Handler) resolve(ctx context.Context, u *store.User, name string) string {
	lbs, err := h.svc.Leaderboards(ctx, u)
	if err != nil {
		return name
	}
	found := ""
	for _, lb := range lbs {
		if lb.Name == name {
			return name
		}
		if strings.EqualFold(lb.Name, name) {
			if found != "" {
				return name
			}
			found = lb.Name
		}
	}
	if found == "" {
		return name
	}
	return found
}

// upload reads the submission and submits it as the path says.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request, u *store.User) (*store.Submission, error) {
	name, code, err := h.readFile(w, r)
	if err != nil {
		return nil, err
	}
	mode := r.PathValue("mode")
	switch mode {
	case "test", "benchmark", "leaderboard", "profile":
	default:
		return nil, api.Errorf(api.CodeInvalid, "Invalid submission mode value: '%s' (test, benchmark, leaderboard or profile)", mode)
	}
	return h.svc.Submit(r.Context(), u, api.SubmitRequest{Leaderboard: h.resolve(r.Context(), u, r.PathValue("lb")), GPU: r.PathValue("gpu"),
		Mode: mode, FileName: name, Code: code})
}

// readFile takes the multipart body's one part, the field "file".
func (h *Handler) readFile(w http.ResponseWriter, r *http.Request) (string, []byte, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return "", nil, api.Errorf(api.CodeInvalid, "the body must be multipart/form-data with the submission in the field \"file\"")
	}
	// The form's own framing is small: a few KiB over the file's limit.
	mr := multipart.NewReader(http.MaxBytesReader(w, r.Body, h.maxBytes+16<<10), params["boundary"])
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return "", nil, api.Errorf(api.CodeInvalid, "the form has no field \"file\"")
		}
		if err != nil {
			return "", nil, bodyError(err)
		}
		if part.FormName() != "file" {
			continue
		}
		code, err := io.ReadAll(io.LimitReader(part, h.maxBytes+1))
		if err != nil {
			return "", nil, bodyError(err)
		}
		if int64(len(code)) > h.maxBytes {
			return "", nil, api.Errorf(api.CodeTooLarge, "Submission file is too large (limit: %d bytes).", h.maxBytes)
		}
		// Read to the end, so that the server sees a client that goes
		// away while its submission streams.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<10))
		name := part.FileName()
		if name == "" {
			return "", nil, api.Errorf(api.CodeInvalid, "the form's field \"file\" has no file name")
		}
		return filepath.Base(name), code, nil
	}
}

func bodyError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || api.ErrorCode(err) != api.CodeInternal {
		return err
	}
	return api.Errorf(api.CodeInvalid, "read the form: %v", err)
}

func (h *Handler) submitBackground(w http.ResponseWriter, r *http.Request, u *store.User) error {
	sub, err := h.upload(w, r, u)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, accepted{Status: "accepted", Details: details{ID: sub.ID},
		RunnerQueue: h.runnerQueue(r.Context(), u, sub.GPUType)})
}

// runnerQueue is the queue of the submission's GPU type, which popcorn
// prints while it waits; nil when it cannot be read (it is optional).
func (h *Handler) runnerQueue(ctx context.Context, u *store.User, gpu string) *runnerQueue {
	q, err := h.svc.Queue(ctx, u)
	if err != nil {
		return nil
	}
	for _, g := range q.GPUs {
		if g.GPUType == gpu {
			return &runnerQueue{Runner: "kernelbox", GPU: gpu, QueuedJobs: g.Queued, RunningJobs: g.Running}
		}
	}
	return &runnerQueue{Runner: "kernelbox", GPU: gpu}
}

func (h *Handler) submissions(w http.ResponseWriter, r *http.Request, u *store.User) error {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return api.Errorf(api.CodeInvalid, "limit must be between 1 and 100")
		}
		limit = n
	}
	lb := r.URL.Query().Get("leaderboard")
	if lb != "" {
		lb = h.resolve(r.Context(), u, lb)
	}
	subs, err := h.svc.MySubmissions(r.Context(), u, lb, limit)
	if err != nil {
		return err
	}
	out := make([]listed, len(subs))
	for i, s := range subs {
		out[i] = wireListed(s)
	}
	return writeJSON(w, http.StatusOK, out)
}

// submission is what popcorn polls every 5 s until done: it must never
// answer a poll with 429 or 5xx (the client gives up at the first).
func (h *Handler) submission(w http.ResponseWriter, r *http.Request, u *store.User) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	v, err := h.svc.SubmissionView(r.Context(), u, id, true)
	if err != nil {
		return err
	}
	out := wireSubmission(v)
	if !out.Done {
		out.RunnerQueue = h.runnerQueue(r.Context(), u, v.GPUType)
	}
	return writeJSON(w, http.StatusOK, out)
}

func (h *Handler) deleteSubmission(w http.ResponseWriter, r *http.Request, u *store.User) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	if err := h.svc.DeleteMySubmission(r.Context(), u, id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "submission_id": id})
}

func (h *Handler) join(w http.ResponseWriter, r *http.Request, u *store.User) error {
	var req struct {
		Code string `json:"code"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		return api.Errorf(api.CodeInvalid, "the body must be JSON {\"code\": INVITE}: %v", err)
	}
	if req.Code == "" {
		return api.Errorf(api.CodeInvalid, "Missing required field: code")
	}
	joined, err := h.svc.Join(r.Context(), u, req.Code)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "leaderboards": nonNil(joined.Leaderboards)})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
