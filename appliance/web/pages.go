package web

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/yuin/goldmark"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request, u *store.User) error {
	return h.render(w, r, u, http.StatusOK, "login", "Sign in", loginPage{Next: safeNext(r.URL.Query().Get("next"))})
}

type loginPage struct {
	Next, Error string
	// Token is shown once, after an invite made the account.
	Token string
}

// safeNext keeps a redirect after sign-in on this box: a path, never
// another host ("//evil", "https://...").
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "/"
	}
	// Browsers drop tabs and newlines from a Location: "/\t/evil" is "//evil".
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return "/"
		}
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return next
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request, _ *store.User) error {
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	u, err := h.svc.Authenticate(r.Context(), token)
	if err != nil || token == "" {
		return h.render(w, r, nil, http.StatusUnauthorized, "login", "Sign in",
			loginPage{Next: next, Error: "That token is not valid on this box. An organiser gives tokens out (`kernelbox admin token NAME`)."})
	}
	h.setSession(w, r, token)
	h.log.Info("signed in on the web", "user", u.Name)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

func (h *Handler) register(w http.ResponseWriter, r *http.Request, _ *store.User) error {
	cred, err := h.svc.Register(r.Context(), api.RegisterRequest{
		Invite: strings.TrimSpace(r.PostFormValue("invite")), Name: strings.TrimSpace(r.PostFormValue("name"))})
	if err != nil {
		if api.ErrorCode(err) == api.CodeInternal {
			return err
		}
		return h.render(w, r, nil, api.HTTPStatus(api.ErrorCode(err)), "login", "Sign in", loginPage{Next: "/", Error: err.Error()})
	}
	h.setSession(w, r, cred.Token)
	u, err := h.svc.Authenticate(r.Context(), cred.Token)
	if err != nil {
		return err
	}
	// The token is the account's only key: shown this once, for the CLI.
	return h.render(w, r, u, http.StatusOK, "login", "Welcome", loginPage{Next: "/", Token: cred.Token})
}

func (h *Handler) setSession(w http.ResponseWriter, r *http.Request, token string) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: overTLS(r), MaxAge: 30 * 24 * 3600})
}

// overTLS says whether the browser reached the box over TLS: the daemon
// serves plain HTTP, so that is a TLS reverse proxy in front of it, which
// says so in X-Forwarded-Proto or Forwarded (RFC 7239). The header is not
// trusted for anything else: a Secure cookie only keeps the browser from
// sending it over plain HTTP, so a forged header can harm no one else.
func overTLS(r *http.Request) bool {
	if r.TLS != nil || strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https") {
		return true
	}
	for _, f := range r.Header.Values("Forwarded") {
		for _, part := range strings.FieldsFunc(f, func(c rune) bool { return c == ';' || c == ',' }) {
			k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
			if strings.EqualFold(k, "proto") && strings.EqualFold(strings.Trim(v, `"`), "https") {
				return true
			}
		}
	}
	return false
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request, _ *store.User) error {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: overTLS(r), MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}

// board is one leaderboard with its rankings, as the overview, the
// leaderboard page and the projector board show it.
type board struct {
	Info    api.LeaderboardInfo
	Ranking api.Ranking
}

func (h *Handler) boards(r *http.Request, u *store.User) ([]board, error) {
	lbs, err := h.svc.Leaderboards(r.Context(), u)
	if err != nil {
		return nil, err
	}
	out := make([]board, 0, len(lbs))
	for _, lb := range lbs {
		rk, err := h.svc.Ranking(r.Context(), u, lb.Name, "")
		if err != nil {
			return nil, fmt.Errorf("ranking of %s: %w", lb.Name, err)
		}
		out = append(out, board{Info: lb, Ranking: rk})
	}
	return out, nil
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request, u *store.User) error {
	bs, err := h.boards(r, u)
	if err != nil {
		return err
	}
	return h.render(w, r, u, http.StatusOK, "overview", "Problems", bs)
}

type livePage struct{ Boards []board }

func (livePage) refresh() int { return 5 }

func (h *Handler) live(w http.ResponseWriter, r *http.Request, u *store.User) error {
	bs, err := h.boards(r, u)
	if err != nil {
		return err
	}
	return h.render(w, r, u, http.StatusOK, "live", "Live", livePage{Boards: bs})
}

type problemPage struct {
	Info        api.LeaderboardInfo
	Description template.HTML
	Mine        []api.Submission
	Modes       []string
}

func (h *Handler) problem(w http.ResponseWriter, r *http.Request, u *store.User) error {
	name := r.PathValue("name")
	info, err := h.svc.Leaderboard(r.Context(), u, name)
	if err != nil {
		return err
	}
	desc, err := markdown(info.Description)
	if err != nil {
		return fmt.Errorf("problem %s: %w", name, err)
	}
	mine, err := h.svc.MySubmissions(r.Context(), u, info.Name, 20)
	if err != nil {
		return err
	}
	return h.render(w, r, u, http.StatusOK, "problem", info.Name, problemPage{Info: info, Description: desc, Mine: mine,
		Modes: []string{"test", "benchmark", "leaderboard", "profile"}})
}

// markdown renders a problem's description. goldmark leaves raw HTML
// out by default, so an organiser's description cannot carry a script.
func markdown(src string) (template.HTML, error) {
	var buf bytes.Buffer
	if err := goldmark.Convert([]byte(src), &buf); err != nil {
		return "", fmt.Errorf("render the description: %w", err)
	}
	return template.HTML(buf.String()), nil //nolint:gosec // goldmark escapes and drops raw HTML (its default, not WithUnsafe)
}

func (h *Handler) template(w http.ResponseWriter, r *http.Request, u *store.User) error {
	name, code, err := h.svc.Template(r.Context(), u, r.PathValue("name"), r.PathValue("key"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	_, err = w.Write(code)
	return err
}

func (h *Handler) leaderboard(w http.ResponseWriter, r *http.Request, u *store.User) error {
	name := r.PathValue("name")
	info, err := h.svc.Leaderboard(r.Context(), u, name)
	if err != nil {
		return err
	}
	rk, err := h.svc.Ranking(r.Context(), u, info.Name, "")
	if err != nil {
		return err
	}
	return h.render(w, r, u, http.StatusOK, "leaderboard", info.Name+" leaderboard", board{Info: info, Ranking: rk})
}

// maxEditorBytes caps code pasted into the form's text area; a file
// upload is held to the box's own limit.
const maxEditorBytes = 1 << 20

func (h *Handler) submit(w http.ResponseWriter, r *http.Request, u *store.User) error {
	req := api.SubmitRequest{Leaderboard: r.PostFormValue("leaderboard"), GPU: r.PostFormValue("gpu"),
		Mode: r.PostFormValue("mode"), FileName: "submission.py", Code: []byte(r.PostFormValue("code"))}
	if req.Leaderboard != "" {
		// The editor's text is named as the problem's language's file.
		if info, err := h.svc.Leaderboard(r.Context(), u, req.Leaderboard); err == nil && info.Lang == "cu" {
			req.FileName = "submission.cu"
		}
	}
	if len(req.Code) > maxEditorBytes {
		return api.Errorf(api.CodeTooLarge, "the code in the editor is over %d bytes: upload it as a file", maxEditorBytes)
	}
	if f, fh, err := r.FormFile("file"); err == nil {
		defer f.Close()
		code, err := io.ReadAll(f)
		if err != nil {
			return formError(err)
		}
		if len(code) > 0 {
			req.Code, req.FileName = code, fh.Filename
		}
	}
	if len(bytes.TrimSpace(req.Code)) == 0 {
		return api.Errorf(api.CodeInvalid, "nothing to submit: paste code into the editor or choose a file")
	}
	if req.Leaderboard == "" {
		return api.Errorf(api.CodeInvalid, "the form names no leaderboard")
	}
	sub, err := h.svc.Submit(r.Context(), u, req)
	if err != nil {
		return err
	}
	h.log.Info("submitted on the web", "user", u.Name, "submission", sub.ID, "leaderboard", req.Leaderboard)
	http.Redirect(w, r, "/submissions/"+strconv.FormatInt(sub.ID, 10), http.StatusSeeOther)
	return nil
}

func (h *Handler) submission(w http.ResponseWriter, r *http.Request, u *store.User) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	// The running page's script asks every second for the live part,
	// which shows no code: it is not read (nor an archive unpacked) then.
	livePart := r.URL.Query().Get("part") == "live"
	v, err := h.svc.SubmissionView(r.Context(), u, id, !livePart)
	if err != nil {
		return err
	}
	d, err := h.details(r, u, v)
	if err != nil {
		return err
	}
	if livePart {
		// The running page's script asks for this part alone.
		return h.render(w, r, u, http.StatusOK, "submission-live", "", d)
	}
	return h.render(w, r, u, http.StatusOK, "submission", fmt.Sprintf("Submission %d", id), d)
}

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request, u *store.User) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	if _, err := h.svc.Cancel(r.Context(), u, id); err != nil {
		return err
	}
	http.Redirect(w, r, "/submissions/"+strconv.FormatInt(id, 10), http.StatusSeeOther)
	return nil
}

func (h *Handler) profile(w http.ResponseWriter, r *http.Request, u *store.User) error {
	id, err := api.SubmissionID(r)
	if err != nil {
		return err
	}
	run, _ := strconv.ParseInt(r.URL.Query().Get("run"), 10, 64)
	f, err := h.svc.OpenProfile(r.Context(), u, id, max(run, 0))
	if err != nil {
		return err
	}
	defer f.Close()
	return api.ServeProfile(w, r, id, f)
}

type minePage struct {
	Subs  []api.Submission
	Bests []best
}

// best is one of the user's standings: a leaderboard, a GPU type, the
// rank and score there.
type best struct {
	Leaderboard, GPU string
	Row              api.RankRow
	Of               int
}

func (h *Handler) mine(w http.ResponseWriter, r *http.Request, u *store.User) error {
	subs, err := h.svc.MySubmissions(r.Context(), u, "", 200)
	if err != nil {
		return err
	}
	bs, err := h.boards(r, u)
	if err != nil {
		return err
	}
	var bests []best
	for _, b := range bs {
		for _, g := range b.Ranking.Rankings {
			if i := slices.IndexFunc(g.Rows, func(row api.RankRow) bool { return row.User == u.Name }); i >= 0 {
				bests = append(bests, best{Leaderboard: b.Info.Name, GPU: g.GPU, Row: g.Rows[i], Of: len(g.Rows)})
			}
		}
	}
	return h.render(w, r, u, http.StatusOK, "mine", "My submissions", minePage{Subs: subs, Bests: bests})
}

type queuePage struct {
	Queue *api.QueueStatus
	GPUs  api.GPUsStatus
}

func (queuePage) refresh() int { return 5 }

func (h *Handler) queue(w http.ResponseWriter, r *http.Request, u *store.User) error {
	q, err := h.svc.Queue(r.Context(), u)
	if err != nil {
		return err
	}
	g, err := h.svc.GPUs()
	if err != nil {
		return err
	}
	return h.render(w, r, u, http.StatusOK, "queue", "Queue", queuePage{Queue: q, GPUs: g})
}
