package appliance

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
)

// browser is an HTTP client with a cookie jar: what a browser without
// JavaScript does with the pages.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	return &browser{t: t, base: base, c: c}
}

// do sends a request and returns the final status, URL path and body.
func (b *browser) do(req *http.Request) (int, string, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, resp.Request.URL.Path, string(body)
}

func (b *browser) get(path string) (int, string, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

func (b *browser) post(path string, form url.Values, hdr map[string]string) (int, string, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return b.do(req)
}

// postFile sends a multipart form, as the submit form with a file does.
func (b *browser) postFile(path string, form url.Values, file string, data []byte) (int, string, string) {
	b.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, vs := range form {
		for _, v := range vs {
			if err := mw.WriteField(k, v); err != nil {
				b.t.Fatal(err)
			}
		}
	}
	fw, err := mw.CreateFormFile("file", file)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := fw.Write(data); err != nil {
		b.t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		b.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, b.base+path, &body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return b.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s: want %q in the page; it is:\n%s", what, w, body)
		}
	}
}

// TestWeb_SubmitAndRead walks the pages without JavaScript against a real
// daemon: sign in, read a problem, submit through the form, watch the run
// end, see the result, the ranking, the projector board, the queue; and
// the refusals: a wrong token, a form without its CSRF token or from
// another origin, a signed-out visit, an invite that makes an account.
func TestWeb_SubmitAndRead(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	b := newBrowser(t, td.server)

	if code, path, body := b.get("/problems/quick"); code != http.StatusOK || path != "/login" {
		t.Fatalf("signed out: GET /problems/quick = %d at %s, want the sign-in page", code, path)
	} else {
		mustContain(t, "sign-in page", body, "With a token", "With an invite code", `value="/problems/quick"`)
	}
	if code, _, body := b.post("/login", url.Values{"token": {"kb_wrong"}}, nil); code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d, want 401:\n%s", code, body)
	} else {
		mustContain(t, "wrong token", body, "not valid on this box")
	}
	code, path, body := b.post("/login", url.Values{"token": {td.token}, "next": {"/problems/quick"}}, nil)
	if code != http.StatusOK || path != "/problems/quick" {
		t.Fatalf("sign in: %d at %s:\n%s", code, path, body)
	}
	// The description is Markdown rendered; the template is offered.
	mustContain(t, "problem page", body, "<p>Double every element", `/problems/quick/templates/Python`, `name="leaderboard" value="quick"`)
	csrf := csrfOf(t, body)
	if code, _, tmpl := b.get("/problems/quick/templates/Python"); code != http.StatusOK || !strings.Contains(tmpl, "def custom_kernel") {
		t.Errorf("template download: %d\n%s", code, tmpl)
	}

	sol, err := os.ReadFile(filepath.Join("testdata", "quick", "solutions", "correct", "double.py"))
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"leaderboard": {"quick"}, "gpu": {"cpu"}, "mode": {"leaderboard"}, "code": {string(sol)}}
	if code, _, body := b.post("/submit", form, nil); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Errorf("a form without its CSRF token: %d, want 403 naming CSRF:\n%s", code, body)
	}
	form.Set("csrf", csrf)
	if code, _, body := b.post("/submit", form, map[string]string{"Origin": "http://elsewhere.invalid"}); code != http.StatusForbidden {
		t.Errorf("a form from another origin: %d, want 403:\n%s", code, body)
	}
	code, path, body = b.post("/submit", form, nil)
	if code != http.StatusOK || !strings.HasPrefix(path, "/submissions/") {
		t.Fatalf("submit: %d at %s:\n%s", code, path, body)
	}
	mustContain(t, "submission page", body, "Submission ", `id="live"`, "leaderboard mode")

	// What the page's script does: the live part until it says ended.
	var live string
	waitFor(t, 60*time.Second, func() bool {
		_, _, live = b.get(path + "?part=live")
		return strings.Contains(live, `data-ended="true"`)
	})
	if strings.Contains(live, "<html") {
		t.Errorf("the live part came with the layout around it")
	}
	_, _, body = b.get(path)
	mustContain(t, "ended submission", body, `id="status">passed`, "Benchmarks", "Tests", `<svg class="plot"`, "def custom_kernel")

	_, _, body = b.get("/leaderboards/quick")
	mustContain(t, "leaderboard", body, `class="medal gold"`, "<td>admin</td>", strings.TrimPrefix(path, "/submissions/"))
	for page, want := range map[string]string{"/live": "admin", "/": "quick", "/me": "Standings", "/queue": "<td>cpu</td>"} {
		if code, _, body := b.get(page); code != http.StatusOK {
			t.Errorf("GET %s = %d:\n%s", page, code, body)
		} else {
			mustContain(t, page, body, want)
		}
	}
	// A file upload: a wrong solution, which fails with its reason shown.
	wrong, err := os.ReadFile(filepath.Join("testdata", "quick", "solutions", "wrong", "zero_last.py"))
	if err != nil {
		t.Fatal(err)
	}
	code, path, _ = b.postFile("/submit", url.Values{"leaderboard": {"quick"}, "gpu": {"cpu"}, "mode": {"test"}, "csrf": {csrf}}, "zero_last.py", wrong)
	if code != http.StatusOK {
		t.Fatalf("file submit: %d at %s", code, path)
	}
	waitFor(t, 60*time.Second, func() bool {
		_, _, live = b.get(path + "?part=live")
		return strings.Contains(live, `data-ended="true"`)
	})
	mustContain(t, "wrong solution", live, `id="status">failed`, "wrong result")

	if code, _, body := b.get("/no/such/page"); code != http.StatusNotFound || !strings.Contains(body, "no such page") {
		t.Errorf("unknown page: %d\n%s", code, body)
	}
	if code, _, body := b.get("/api/nope"); code != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
		t.Errorf("unknown API path: %d, want the API's JSON 404:\n%s", code, body)
	}

	// An invite makes an account, shows its token once, and signs it in.
	inv, err := td.admin.CreateInvite(t.Context(), api.Invite{Role: api.RoleContestant, Uses: 1})
	if err != nil {
		t.Fatal(err)
	}
	nb := newBrowser(t, td.server)
	code, _, body = nb.post("/register", url.Values{"invite": {inv.Invite}, "name": {"zoe"}}, nil)
	if code != http.StatusOK {
		t.Fatalf("register: %d\n%s", code, body)
	}
	mustContain(t, "welcome", body, "shown this once", "zoe")
	if _, path, _ := nb.get("/me"); path != "/me" {
		t.Errorf("after registering, /me went to %s", path)
	}
	if code, _, body := nb.post("/register", url.Values{"invite": {inv.Invite}, "name": {"zed"}}, nil); code == http.StatusOK {
		t.Errorf("a spent invite made an account:\n%s", body)
	}

	// Signing out ends the session.
	_, _, body = b.get("/")
	if code, _, _ := b.post("/logout", url.Values{"csrf": {csrfOf(t, body)}}, nil); code != http.StatusOK {
		t.Errorf("logout: %d", code)
	}
	if _, path, _ := b.get("/me"); path != "/login" {
		t.Errorf("after signing out, /me went to %s", path)
	}
}
