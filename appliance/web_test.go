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
	"strconv"
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
	// The sign-in form has no session to carry a CSRF token: a POST from
	// another origin, or from an opaque one ("null"), is refused outright.
	for _, origin := range []string{"http://elsewhere.invalid", "null"} {
		if code, _, _ := b.post("/login", url.Values{"token": {td.token}}, map[string]string{"Origin": origin}); code != http.StatusForbidden {
			t.Errorf("sign-in posted from origin %s: %d, want 403", origin, code)
		}
	}
	if code, _, _ := b.post("/login", url.Values{"token": {td.token}}, map[string]string{"Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Errorf("sign-in posted cross-site (Sec-Fetch-Site): %d, want 403", code)
	}
	code, path, body := b.post("/login", url.Values{"token": {td.token}, "next": {"/problems/quick"}}, nil)
	if code != http.StatusOK || path != "/problems/quick" {
		t.Fatalf("sign in: %d at %s:\n%s", code, path, body)
	}
	// The description is Markdown rendered; the template is offered.
	mustContain(t, "problem page", body, "<p>Double every element", `/problems/quick/templates/Python`, `name="leaderboard" value="quick"`,
		"<code>n: 3; seed: 1</code>", "<code>n: 1000; seed: 4</code>")
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
	rankedPath := path
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
	mustContain(t, "leaderboard", body, `class="medal gold"`, "<td>admin</td>", "<td>PyTorch</td>", strings.TrimPrefix(path, "/submissions/"))
	for page, want := range map[string][]string{"/live": {"admin"}, "/": {"quick"}, "/me": {"Standings"},
		"/queue": {"<td>cpu</td>", "No GPUs: the CPU backend serves this box."}} {
		if code, _, body := b.get(page); code != http.StatusOK {
			t.Errorf("GET %s = %d:\n%s", page, code, body)
		} else {
			mustContain(t, page, body, want...)
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

	// While the queue is paused the page says where the submission waits;
	// once it runs, each test's verdict shows as it arrives.
	if _, err := td.admin.Pause(t.Context(), "web test"); err != nil {
		t.Fatal(err)
	}
	slow := "import time\ndef custom_kernel(xs):\n    time.sleep(1.5)\n    return [2 * x for x in xs]\n"
	_, path, _ = b.post("/submit", url.Values{"leaderboard": {"quick"}, "gpu": {"cpu"}, "mode": {"test"}, "code": {slow}, "csrf": {csrf}}, nil)
	_, _, live = b.get(path + "?part=live")
	mustContain(t, "a queued submission", live, "place 1 in the queue", `data-ended="false"`, ">Cancel</button>")
	if _, err := td.admin.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() bool {
		_, _, live = b.get(path + "?part=live")
		return strings.Contains(live, "test 0 (n: 3; seed: 1): pass") || strings.Contains(live, `data-ended="true"`)
	})
	mustContain(t, "a running submission", live, "test 0 (n: 3; seed: 1): pass", `data-ended="false"`)
	if code, _, body := b.get(path + "/profile"); code != http.StatusNotFound || !strings.Contains(body, "no Nsight Compute report") {
		t.Errorf("the profile of a run without one: %d\n%s", code, body)
	}

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
	// A contestant reads another's ranked entry's per-shape times (the
	// plot's leader), never the submission itself.
	zoeToken := regexp.MustCompile(`id="token">([^<]+)<`).FindStringSubmatch(body)
	if zoeToken == nil {
		t.Fatalf("no token on the welcome page:\n%s", body)
	}
	zoe, err := api.NewClient(td.server, zoeToken[1])
	if err != nil {
		t.Fatal(err)
	}
	ranked, _ := strconv.ParseInt(strings.TrimPrefix(rankedPath, "/submissions/"), 10, 64)
	if e, err := zoe.Entry(t.Context(), "quick", ranked); err != nil || e.Row.User != "admin" || len(e.Shapes) != 2 || e.Shapes[0].MeanNs <= 0 {
		t.Errorf("Entry(quick, %d) as zoe = %+v, %v; want admin's two shapes", ranked, e, err)
	}
	if _, err := zoe.Submission(t.Context(), ranked, true); err == nil {
		t.Errorf("zoe read admin's submission: %v", err)
	}
	if _, err := zoe.Entry(t.Context(), "quick", ranked+1); api.ErrorCode(err) != api.CodeNotFound {
		t.Errorf("Entry of a submission that does not rank = %v, want not_found", err)
	}
	if _, path, _ := nb.get("/me"); path != "/me" {
		t.Errorf("after registering, /me went to %s", path)
	}
	if code, _, body := nb.post("/register", url.Values{"invite": {inv.Invite}, "name": {"zed"}}, nil); code == http.StatusOK {
		t.Errorf("a spent invite made an account:\n%s", body)
	}

	// Signed in, the sign-in page still works (another account on a
	// shared machine): its forms carry the session's CSRF token.
	_, _, body = b.get("/login")
	if code, path, _ := b.post("/login", url.Values{"token": {td.token}, "next": {"/queue"}, "csrf": {csrfOf(t, body)}}, nil); code != http.StatusOK || path != "/queue" {
		t.Errorf("signing in again while signed in: %d at %s", code, path)
	}
	// An upload over the box's cap is refused by size, not read whole.
	big := bytes.Repeat([]byte("#"), 3<<20)
	if code, _, body := b.postFile("/submit", url.Values{"leaderboard": {"quick"}, "gpu": {"cpu"}, "mode": {"test"}, "csrf": {csrf}}, "big.py", big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 3 MiB upload: %d, want 413:\n%s", code, body)
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

var inviteRE = regexp.MustCompile(`id="invite-code">(inv_[A-Za-z0-9_-]+)<`)

// TestWeb_Organiser: the organisers' page, as an organiser would use it
// at a hackathon: make an invite and see its code once, review a flagged
// submission, ban and unban a contestant, close a leaderboard and set its
// deadline; a contestant is refused the page and its forms.
func TestWeb_Organiser(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	ctx := t.Context()
	org := newBrowser(t, td.server)
	_, _, body := org.post("/login", url.Values{"token": {td.token}, "next": {"/admin"}}, nil)
	mustContain(t, "organisers' page", body, "Nothing waits for review", `action="/admin/leaderboards/quick"`, ">Organisers</a>")
	csrf := csrfOf(t, body)

	code, _, body := org.post("/admin/invites", url.Values{"csrf": {csrf}, "role": {"contestant"}, "uses": {"1"}}, nil)
	m := inviteRE.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		t.Fatalf("make an invite: %d, no code shown:\n%s", code, body)
	}
	cara := newBrowser(t, td.server)
	if code, _, body := cara.post("/register", url.Values{"invite": {m[1]}, "name": {"cara"}}, nil); code != http.StatusOK {
		t.Fatalf("register with the invite: %d\n%s", code, body)
	}
	if code, _, body := cara.get("/admin"); code != http.StatusForbidden || !strings.Contains(body, "for organisers") {
		t.Errorf("a contestant opens /admin: %d, want 403:\n%s", code, body)
	}
	_, _, body = cara.get("/problems/quick")
	caraCSRF := csrfOf(t, body)
	if code, _, _ := cara.post("/admin/users/cara/ban", url.Values{"csrf": {caraCSRF}, "banned": {"false"}}, nil); code != http.StatusForbidden {
		t.Errorf("a contestant posts to an organiser's form: %d, want 403", code)
	}

	// A threaded kernel is flagged and held out until reviewed.
	threaded := "import threading\ndef custom_kernel(xs):\n    return [2 * x for x in xs]\n"
	_, path, _ := cara.post("/submit", url.Values{"csrf": {caraCSRF}, "leaderboard": {"quick"}, "gpu": {"cpu"}, "mode": {"leaderboard"}, "code": {threaded}}, nil)
	id := strings.TrimPrefix(path, "/submissions/")
	_, _, body = org.get("/admin")
	mustContain(t, "review list", body, `action="/admin/submissions/`+id+`/review"`, "THREADS")
	waitFor(t, 60*time.Second, func() bool {
		_, _, live := cara.get(path + "?part=live")
		return strings.Contains(live, `data-ended="true"`)
	})
	if _, _, body := org.get("/leaderboards/quick"); strings.Contains(body, "<td>cara</td>") {
		t.Errorf("a flagged submission is ranked before its review")
	}
	if code, path, body := org.post("/admin/submissions/"+id+"/review", url.Values{"csrf": {csrf}, "review": {"cleared"}}, nil); code != http.StatusOK || path != "/admin" {
		t.Fatalf("clear it: %d at %s\n%s", code, path, body)
	} else {
		mustContain(t, "after review", body, "Done: submission "+id+" cleared", "Nothing waits for review")
	}
	_, _, body = org.get("/leaderboards/quick")
	mustContain(t, "ranking after review", body, "<td>cara</td>")

	// A ban holds on the pages as on the API: cara reads, does not act.
	org.post("/admin/users/cara/ban", url.Values{"csrf": {csrf}, "banned": {"true"}}, nil)
	if code, _, body := cara.post("/submit", url.Values{"csrf": {caraCSRF}, "leaderboard": {"quick"}, "gpu": {"cpu"}, "mode": {"test"}, "code": {threaded}}, nil); code != http.StatusForbidden || !strings.Contains(body, "banned") {
		t.Errorf("a banned user submits: %d, want 403 naming the ban:\n%s", code, body)
	}
	if code, _, _ := cara.get("/leaderboards/quick"); code != http.StatusOK {
		t.Errorf("a banned user reads: %d", code)
	}
	org.post("/admin/users/cara/ban", url.Values{"csrf": {csrf}, "banned": {"false"}}, nil)

	// A banned organiser reads the contest, not the organisers' page.
	cred, err := td.admin.AddUser(ctx, "olga", api.RoleOrganiser)
	if err != nil {
		t.Fatal(err)
	}
	olga := newBrowser(t, td.server)
	olga.post("/login", url.Values{"token": {cred.Token}}, nil)
	if code, _, _ := olga.get("/admin"); code != http.StatusOK {
		t.Errorf("an organiser opens /admin: %d", code)
	}
	org.post("/admin/users/olga/ban", url.Values{"csrf": {csrf}, "banned": {"true"}}, nil)
	if code, _, body := olga.get("/admin"); code != http.StatusForbidden || !strings.Contains(body, "banned") {
		t.Errorf("a banned organiser opens /admin: %d, want 403:\n%s", code, body)
	}
	// A contestant's own ranked entry links to its submission (others'
	// rows, which would answer 404, are not linked).
	if _, _, body := cara.get("/leaderboards/quick"); !strings.Contains(body, `href="/submissions/`+id+`"`) {
		t.Errorf("cara's own entry is not linked")
	}

	// Close the leaderboard: cara, invited to none, no longer sees it.
	if code, _, body := org.post("/admin/leaderboards/quick", url.Values{"csrf": {csrf}, "visibility": {"closed"}}, nil); code != http.StatusOK {
		t.Fatalf("close quick: %d\n%s", code, body)
	}
	if code, _, _ := cara.get("/problems/quick"); code != http.StatusForbidden {
		t.Errorf("a closed leaderboard to a contestant not invited: %d, want 403", code)
	}
	if code, _, body := org.post("/admin/leaderboards/quick", url.Values{"csrf": {csrf}, "deadline": {"2100-01-02T03:04"}}, nil); code != http.StatusOK {
		t.Fatalf("set the deadline: %d\n%s", code, body)
	}
	if code, _, body := org.post("/admin/leaderboards/quick", url.Values{"csrf": {csrf}, "deadline": {"next week"}}, nil); code != http.StatusBadRequest || !strings.Contains(body, "2026-12-31T18:00") {
		t.Errorf("a bad deadline: %d, want 400 with an example:\n%s", code, body)
	}
	info, err := td.admin.Leaderboard(ctx, "quick")
	if err != nil {
		t.Fatal(err)
	}
	if info.Visibility != api.VisibilityClosed || !info.Deadline.Equal(time.Date(2100, 1, 2, 3, 4, 0, 0, time.UTC)) {
		t.Errorf("quick after the edits = %s, deadline %s", info.Visibility, info.Deadline)
	}
}

// TestWeb_GPUTelemetry: a run on a GPU (a fake H200, CPU-backed) shows
// the GPU's readings and its clock and temperature over the run.
func TestWeb_GPUTelemetry(t *testing.T) {
	t.Parallel()
	td := fakeH200Daemon(t, false)
	td.loadQuickOn("[H200]")
	b := newBrowser(t, td.server)
	_, _, body := b.post("/login", url.Values{"token": {td.token}, "next": {"/problems/quickgpu"}}, nil)
	sol := "def custom_kernel(xs):\n    return [2 * x for x in xs]\n"
	code, path, body := b.post("/submit", url.Values{"csrf": {csrfOf(t, body)}, "leaderboard": {"quickgpu"}, "gpu": {"H200"}, "mode": {"benchmark"}, "code": {sol}}, nil)
	if code != http.StatusOK || !strings.HasPrefix(path, "/submissions/") {
		t.Fatalf("submit: %d at %s\n%s", code, path, body)
	}
	var live string
	waitFor(t, 60*time.Second, func() bool {
		_, _, live = b.get(path + "?part=live")
		return strings.Contains(live, `data-ended="true"`)
	})
	mustContain(t, "a GPU run's page", live, "GPU during the run", "SM clock", `class="plot series"`, "<polyline")
}
