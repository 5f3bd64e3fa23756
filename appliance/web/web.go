// Package web serves kernelbox's pages for a browser: the problems, the
// leaderboards, a form to submit, a run's details, the queue and a board
// for a hackathon's projector. Pages are rendered on the server and read
// without JavaScript; scripts only keep a running submission's page and
// the projector board current.
//
// It is a front only, like the popcorn protocol beside it: every figure,
// verdict and ranking comes from the daemon's Service, through the calls
// the JSON API makes, so the page and the CLI never disagree.
//
// Sign-in: the page takes an API token (or an invite code, which makes
// an account) and keeps the token in an HttpOnly, SameSite=Lax cookie.
// Forms carry a CSRF token derived from the session's token, which a
// page of another site cannot read, and a POST from another origin is
// refused outright.
package web

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// Service is what the pages need of the daemon.
type Service interface {
	Authenticate(ctx context.Context, token string) (*store.User, error)
	Register(ctx context.Context, req api.RegisterRequest) (api.Credentials, error)
	Leaderboards(ctx context.Context, u *store.User) ([]api.LeaderboardInfo, error)
	Leaderboard(ctx context.Context, u *store.User, name string) (api.LeaderboardInfo, error)
	Ranking(ctx context.Context, u *store.User, name, gpu string) (api.Ranking, error)
	Entry(ctx context.Context, u *store.User, name string, id int64) (api.Entry, error)
	Template(ctx context.Context, u *store.User, leaderboard, key string) (string, []byte, error)
	Submit(ctx context.Context, u *store.User, req api.SubmitRequest) (*store.Submission, error)
	// MySubmissions lists u's own submissions, newest first.
	MySubmissions(ctx context.Context, u *store.User, leaderboard string, limit int) ([]api.Submission, error)
	SubmissionView(ctx context.Context, u *store.User, id int64, withCode bool) (api.SubmissionView, error)
	Cancel(ctx context.Context, u *store.User, id int64) (*store.Submission, error)
	// EventsPage reads a submission's events after a cursor; the caller
	// has checked that the user may see the submission.
	EventsPage(ctx context.Context, id, after int64) (api.EventsPage, bool, error)
	// OpenProfile opens a run's Nsight Compute report (run 0: the first).
	OpenProfile(ctx context.Context, u *store.User, id, run int64) (*os.File, error)
	Queue(ctx context.Context, u *store.User) (*api.QueueStatus, error)
	GPUs() (api.GPUsStatus, error)
}

//go:embed templates static
var assets embed.FS

// sessionCookie holds the signed-in user's API token.
const sessionCookie = "kernelbox_session"

// Handler serves the pages.
type Handler struct {
	svc      Service
	staff    StaffService
	log      *slog.Logger
	maxBytes int64
	pages    map[string]*template.Template
	static   http.Handler
	cross    *http.CrossOriginProtection
}

// New returns the pages' handler; uploads are capped at maxBytes.
func New(svc Service, staff StaffService, log *slog.Logger, maxBytes int64) (*Handler, error) {
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	st, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, fmt.Errorf("web assets: %w", err)
	}
	return &Handler{svc: svc, staff: staff, log: log, maxBytes: maxBytes, pages: pages,
		static: http.StripPrefix("/static/", http.FileServerFS(st)), cross: http.NewCrossOriginProtection()}, nil
}

// handlerFunc is a page handler; u is nil on the pages that need no
// sign-in. Its error becomes an error page.
type handlerFunc func(w http.ResponseWriter, r *http.Request, u *store.User) error

// Routes returns the pages' routes.
func (h *Handler) Routes() http.Handler {
	mux := http.NewServeMux()
	open := func(pattern string, f handlerFunc) { mux.Handle(pattern, h.wrap(f, false)) }
	user := func(pattern string, f handlerFunc) { mux.Handle(pattern, h.wrap(f, true)) }
	mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Embedded files carry no modification time: say how long to keep
		// them (the editor is half a megabyte), short enough to see an
		// upgrade within the hour.
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.static.ServeHTTP(w, r)
	}))
	open("GET /login", h.loginPage)
	open("POST /login", h.login)
	open("POST /register", h.register)
	open("POST /logout", h.logout)
	user("GET /{$}", h.overview)
	user("GET /problems/{name}", h.problem)
	user("GET /problems/{name}/templates/{key}", h.template)
	user("GET /leaderboards/{name}", h.leaderboard)
	user("POST /submit", h.submit)
	user("GET /submissions/{id}", h.submission)
	user("POST /submissions/{id}/cancel", h.cancel)
	user("GET /submissions/{id}/profile", h.profile)
	user("GET /me", h.mine)
	user("GET /queue", h.queue)
	user("GET /live", h.live)
	user("GET /admin", h.admin)
	user("POST /admin/submissions/{id}/review", h.adminReview)
	user("POST /admin/leaderboards/{name}", h.adminLeaderboard)
	user("POST /admin/invites", h.adminInvite)
	user("POST /admin/invites/{id}/revoke", h.adminRevoke)
	user("POST /admin/users/{name}/ban", h.adminBan)
	open("/", func(http.ResponseWriter, *http.Request, *store.User) error {
		return api.Errorf(api.CodeNotFound, "there is no such page")
	})
	return mux
}

func (h *Handler) wrap(f handlerFunc, auth bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The pages are the box's own: no framing by another site, no
		// script or style from elsewhere (a hackathon may have no internet).
		// The editor writes its styles into <style> elements, admitted by
		// this response's nonce; no inline script runs.
		nonce := newNonce()
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'nonce-"+nonce+"'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		r = r.WithContext(context.WithValue(r.Context(), nonceKey{}, nonce))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		u := h.session(r)
		if auth && u == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			h.fail(w, r, nil, api.Errorf(api.CodeUnauthorized, "you are not signed in (or your token was revoked): sign in again"))
			return
		}
		if r.Method == http.MethodPost {
			// A form's body is bounded before anything reads it: a sign-in
			// or an invite is small, a submission is the box's upload cap
			// plus the editor's text.
			limit := int64(maxOpenForm)
			if u != nil {
				limit = h.maxBytes + maxEditorBytes + maxOpenForm
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			if err := h.checkPost(r, u); err != nil {
				h.fail(w, r, u, err)
				return
			}
			if u != nil && u.Banned && r.URL.Path != "/logout" {
				h.fail(w, r, u, api.Errorf(api.CodeForbidden, "user %s is banned: it can read, not act; ask an organiser", u.Name))
				return
			}
		}
		if err := f(w, r, u); err != nil {
			h.fail(w, r, u, err)
		}
	})
}

type nonceKey struct{}

// newNonce is a response's CSP nonce: 128 random bits.
func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)          // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b) // hex is within CSP's base64 alphabet, and needs no escaping
}

// session is the signed-in user, or nil.
func (h *Handler) session(r *http.Request) *store.User {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	u, err := h.svc.Authenticate(r.Context(), c.Value)
	if err != nil {
		return nil
	}
	return u
}

// maxOpenForm caps the body of a form sent without a session.
const maxOpenForm = 64 << 10

// checkPost refuses a form sent from another origin (by Sec-Fetch-Site,
// or an Origin that is not this host, "null" included: the sign-in and
// invite forms have no session to carry a CSRF token, so this is their
// guard against signing a victim into an attacker's account), and a
// signed-in user's form without the session's CSRF token.
func (h *Handler) checkPost(r *http.Request, u *store.User) error {
	if err := h.cross.Check(r); err != nil {
		return api.Errorf(api.CodeForbidden, "a form from another site (origin %q) may not act on this box", r.Header.Get("Origin"))
	}
	if u == nil {
		return nil
	}
	c, _ := r.Cookie(sessionCookie)
	if err := r.ParseMultipartForm(h.maxBytes); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		return formError(err)
	}
	if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(csrfToken(c.Value))) {
		return api.Errorf(api.CodeForbidden, "the form is stale or not this box's (no valid CSRF token): reload the page and send it again")
	}
	return nil
}

// csrfToken is the form token of a session: a MAC of a fixed string under
// the session's own token, which only this box and the signed-in browser
// know, so it needs no server-side state and survives a restart.
func csrfToken(session string) string {
	m := hmac.New(sha256.New, []byte(session))
	m.Write([]byte("kernelbox web form"))
	return hex.EncodeToString(m.Sum(nil))[:32]
}

func formError(err error) error {
	var mbe *http.MaxBytesError
	// The multipart reader reports the body's cap in its own words, not
	// always wrapping the *http.MaxBytesError.
	if errors.As(err, &mbe) || strings.Contains(err.Error(), "too large") {
		return api.Errorf(api.CodeTooLarge, "the form is over the box's upload limit")
	}
	return api.Errorf(api.CodeInvalid, "the form could not be read: %v", err)
}

// page is what every page's template gets.
type page struct {
	Title string
	User  *store.User
	CSRF  string
	// Nonce admits the editor's styles under the page's CSP.
	Nonce string
	// Refresh, when positive, reloads the page every so many seconds
	// without JavaScript (a running submission, the projector board).
	Refresh int
	// NoScriptRefresh does the same for a browser without JavaScript; with
	// it, the page's script reloads only the part that changes.
	NoScriptRefresh int
	Data            any
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, u *store.User, status int, name, title string, data any) error {
	t, ok := h.pages[name]
	if !ok {
		return fmt.Errorf("render %s: no such page template", name)
	}
	p := page{Title: title, User: u, Data: data}
	p.Nonce, _ = r.Context().Value(nonceKey{}).(string)
	if c, err := r.Cookie(sessionCookie); err == nil && u != nil {
		p.CSRF = csrfToken(c.Value)
	}
	if rf, ok := data.(interface{ refresh() int }); ok {
		p.Refresh = rf.refresh()
	}
	if rf, ok := data.(interface{ noScriptRefresh() int }); ok {
		p.NoScriptRefresh = rf.noScriptRefresh()
	}
	// Rendered whole before a byte is sent: a template error is a clean
	// error page, not half a page.
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err := buf.WriteTo(w)
	return err
}

// fail shows err as a page with the API's status for its code. Errors
// without a code are the server's own: the page says so, the log has it.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, u *store.User, err error) {
	code := api.ErrorCode(err)
	msg := err.Error()
	if code == api.CodeInternal {
		h.log.Error("page failed", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "internal error; the server's log has the details"
	}
	status := api.HTTPStatus(code)
	if rerr := h.render(w, r, u, status, "error", "Error", errorPage{Code: string(code), Status: status, Message: msg}); rerr != nil {
		h.log.Error("error page failed", "err", rerr)
		http.Error(w, msg, status)
	}
}

type errorPage struct {
	Code    string
	Status  int
	Message string
}
