package appliance

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// popcornClient speaks to the daemon as popcorn-cli v1.3.23 does
// (docs/interop/popcorn-protocol.md): its header, its multipart upload,
// its 5-second polls (here 100 ms), its stream parser.
type popcornClient struct {
	t    *testing.T
	base string // POPCORN_API_URL
	id   string // cli_id
}

func (pc popcornClient) do(method, path, contentType string, body io.Reader) (int, []byte, http.Header) {
	pc.t.Helper()
	req, err := http.NewRequestWithContext(pc.t.Context(), method, pc.base+path, body)
	if err != nil {
		pc.t.Fatal(err)
	}
	if pc.id != "" {
		req.Header.Set("X-Popcorn-Cli-Id", pc.id)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		pc.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		pc.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp.StatusCode, data, resp.Header
}

// get decodes a 200 answer into v.
func (pc popcornClient) get(path string, v any) {
	pc.t.Helper()
	code, body, _ := pc.do(http.MethodGet, path, "", nil)
	if code != http.StatusOK {
		pc.t.Fatalf("GET %s = %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		pc.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// upload posts a file as popcorn does: one multipart field, "file".
func (pc popcornClient) upload(path, file string) (int, []byte, http.Header) {
	pc.t.Helper()
	code, err := os.ReadFile(file)
	if err != nil {
		pc.t.Fatal(err)
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", filepath.Base(file))
	if err != nil {
		pc.t.Fatal(err)
	}
	fw.Write(code)
	mw.Close()
	return pc.do(http.MethodPost, path, mw.FormDataContentType(), &buf)
}

type popcornSubmission struct {
	ID          int64  `json:"id"`
	Leaderboard string `json:"leaderboard_name"`
	UserID      string `json:"user_id"`
	Done        bool   `json:"done"`
	Code        string `json:"code"`
	Runs        []struct {
		Mode   string   `json:"mode"`
		Secret bool     `json:"secret"`
		Runner string   `json:"runner"`
		Score  *float64 `json:"score"`
		Passed bool     `json:"passed"`
		Start  *string  `json:"start_time"`
	} `json:"runs"`
	Job struct {
		Status string  `json:"status"`
		Error  *string `json:"error"`
	} `json:"job"`
}

// submitAndPoll is popcorn's background submission: 2xx with details.id,
// then polls until job.status is terminal or done is set.
func (pc popcornClient) submitAndPoll(lb, gpu, mode, file string) popcornSubmission {
	pc.t.Helper()
	code, body, _ := pc.upload("/submission/"+lb+"/"+gpu+"/"+mode, file)
	var acc struct {
		Details struct {
			ID int64 `json:"id"`
		} `json:"details"`
		RunnerQueue *struct {
			GPU        string `json:"gpu"`
			QueuedJobs *int   `json:"queued_jobs"`
		} `json:"runner_queue"`
	}
	if err := json.Unmarshal(body, &acc); err != nil || code/100 != 2 || acc.Details.ID == 0 {
		pc.t.Fatalf("submit %s %s = %d %s (%v); want 2xx with details.id", mode, file, code, body, err)
	}
	if acc.RunnerQueue == nil || acc.RunnerQueue.GPU != gpu || acc.RunnerQueue.QueuedJobs == nil {
		pc.t.Errorf("runner_queue = %+v; want the %s queue with queued_jobs", acc.RunnerQueue, gpu)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var s popcornSubmission
		pc.get("/user/submissions/"+itoa(acc.Details.ID), &s)
		switch s.Job.Status {
		case "failed", "timed_out", "hacked":
			return s
		}
		if s.Done {
			return s
		}
		if time.Now().After(deadline) {
			pc.t.Fatalf("submission %d: still %s after 2 minutes", s.ID, s.Job.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestPopcorn_Protocol: popcorn-cli's calls against a daemon, each as the
// client makes and reads it (issue 19).
func TestPopcorn_Protocol(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	_, ann := td.user("ann")
	_, bob := td.user("bob")
	pc := popcornClient{t: t, base: td.server + "/popcorn", id: ann}

	// Identity: popcorn's OAuth cannot reach a box; the header carries a token.
	anon := popcornClient{t: t, base: pc.base}
	for _, tc := range []struct {
		client      popcornClient
		path        string
		code        int
		detailHas   string
		description string
	}{
		{anon, "/auth/init?provider=github", http.StatusForbidden, "cli_id: TOKEN", "register"},
		{anon, "/leaderboards", http.StatusBadRequest, "Missing X-Popcorn-Cli-Id", "no header"},
		{popcornClient{t: t, base: pc.base, id: "not-a-token"}, "/leaderboards", http.StatusUnauthorized, "", "unknown id"},
		{pc, "/gpus/nosuch", http.StatusNotFound, "nosuch", "unknown leaderboard"},
		{pc, "/user/submissions?leaderboard=quick&limit=500", http.StatusBadRequest, "limit must be between 1 and 100", "bad limit"},
		{pc, "/no/such/thing/here", http.StatusNotFound, "does not serve", "unknown path"},
	} {
		code, body, _ := tc.client.do(http.MethodGet, tc.path, "", nil)
		var e struct {
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(body, &e); err != nil || code != tc.code || e.Detail == "" || !strings.Contains(e.Detail, tc.detailHas) {
			t.Errorf("%s: GET %s = %d %s; want %d and a detail with %q", tc.description, tc.path, code, body, tc.code, tc.detailHas)
		}
	}

	// The TUI's pickers: every element needs name, a string description
	// and a task object; GPUs are the strings that go into the URL.
	var lbs []map[string]any
	pc.get("/leaderboards", &lbs)
	found := false
	for _, lb := range lbs {
		_, desc := lb["description"].(string)
		_, task := lb["task"].(map[string]any)
		if !desc || !task {
			t.Errorf("leaderboard element %v lacks a string description or a task object", lb)
		}
		found = found || lb["name"] == "quick"
	}
	if !found {
		t.Errorf("GET /leaderboards = %v; want quick among them", lbs)
	}
	var gpus []string
	if pc.get("/gpus/quick", &gpus); len(gpus) != 1 || gpus[0] != "cpu" {
		t.Errorf("GET /gpus/quick = %v, want [cpu]", gpus)
	}
	// popcorn lowercases the leaderboard it puts in a URL.
	td.loadQuickAs("QuickCaps", "gpus: [cpu]", "gpus: [cpu]")
	if pc.get("/gpus/quickcaps", &gpus); len(gpus) != 1 || gpus[0] != "cpu" {
		t.Errorf("GET /gpus/quickcaps = %v, want QuickCaps's [cpu]", gpus)
	}

	// Background submissions with polling, as since v1.3.16.
	ok := pc.submitAndPoll("quick", "cpu", "test", quickSolution("correct/double.py"))
	if ok.Job.Status != "succeeded" || !ok.Done || len(ok.Runs) != 1 || !ok.Runs[0].Passed || ok.Runs[0].Runner != "cpu" ||
		ok.Runs[0].Start == nil || !strings.Contains(ok.Code, "def custom_kernel") || ok.UserID != "ann" {
		t.Errorf("test mode = %+v; want succeeded, one passed run on cpu, the code", ok)
	}
	ranked := pc.submitAndPoll("quick", "cpu", "leaderboard", quickSolution("correct/double.py"))
	public := 0
	for _, r := range ranked.Runs {
		if r.Mode == "leaderboard" && !r.Secret && r.Score != nil && *r.Score > 0 && r.Passed {
			public++
		}
	}
	if ranked.Job.Status != "succeeded" || public != 1 {
		t.Errorf("leaderboard mode = %+v; want succeeded with one public ranked run with a score", ranked)
	}
	wrong := pc.submitAndPoll("quick", "cpu", "test", quickSolution("wrong/zero_last.py"))
	if wrong.Job.Status != "failed" || wrong.Job.Error == nil || *wrong.Job.Error == "" {
		t.Errorf("wrong solution = %+v; want job failed with its reason", wrong)
	}
	for _, bad := range []struct{ path, want string }{
		{"/submission/quick/cpu/ranked", "Invalid submission mode value: 'ranked'"},
		{"/submission/quick/H100/test", "H100"},
	} {
		code, body, _ := pc.upload(bad.path, quickSolution("correct/double.py"))
		if code/100 != 4 || !strings.Contains(string(body), bad.want) {
			t.Errorf("POST %s = %d %s; want 4xx naming %q", bad.path, code, body, bad.want)
		}
	}

	// The event stream (profile mode, and every mode before v1.3.16):
	// LF-framed messages of one data line each, then one result.
	code, body, hdr := pc.upload("/quick/cpu/test", quickSolution("correct/double.py"))
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream = %d %s %s", code, hdr.Get("Content-Type"), body)
	}
	var events []string
	var result struct {
		Results []struct {
			Success bool `json:"success"`
			Runs    map[string]struct {
				Run struct {
					Passed bool           `json:"passed"`
					Result map[string]any `json:"result"`
				} `json:"run"`
			} `json:"runs"`
		} `json:"results"`
		Reports []string `json:"reports"`
	}
	for _, msg := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		var event, data string
		for _, line := range strings.Split(msg, "\n") {
			if v, ok := strings.CutPrefix(line, "event:"); ok {
				event = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = strings.TrimSpace(v)
			}
		}
		events = append(events, event)
		if event == "result" {
			if err := json.Unmarshal([]byte(data), &result); err != nil {
				t.Errorf("result event %q: %v", data, err)
			}
		}
	}
	if len(events) < 2 || events[0] != "status" || events[len(events)-1] != "result" {
		t.Errorf("stream events = %v; want status first and result last\n%s", events, body)
	}
	if len(result.Results) != 1 || !result.Results[0].Success || !result.Results[0].Runs["test"].Run.Passed ||
		result.Results[0].Runs["test"].Run.Result["check"] != "pass" || len(result.Reports) != 1 {
		t.Errorf("result = %+v; want one passed test run with check pass and a report", result)
	}

	// popcorn submissions list / show / delete.
	var listed []struct {
		ID   int64 `json:"id"`
		Runs []struct {
			GPU string `json:"gpu_type"`
		} `json:"runs"`
	}
	if pc.get("/user/submissions?leaderboard=quick&limit=10", &listed); len(listed) != 4 || listed[0].ID < listed[3].ID || listed[0].Runs[0].GPU != "cpu" {
		t.Errorf("list = %+v; want 4, newest first, on cpu", listed)
	}
	other := popcornClient{t: t, base: pc.base, id: bob}
	if code, body, _ := other.do(http.MethodDelete, "/user/submissions/"+itoa(ok.ID), "", nil); code != http.StatusNotFound {
		t.Errorf("bob deletes ann's submission = %d %s; want 404", code, body)
	}
	if code, body, _ := pc.do(http.MethodDelete, "/user/submissions/"+itoa(ok.ID), "", nil); code != http.StatusOK || !strings.Contains(string(body), `"status":"ok"`) {
		t.Errorf("delete = %d %s; want 200 status ok", code, body)
	}
	if code, _, _ := pc.do(http.MethodGet, "/user/submissions/"+itoa(ok.ID), "", nil); code != http.StatusNotFound {
		t.Errorf("show after delete = %d, want 404", code)
	}
	code, body, _ = pc.do(http.MethodPost, "/user/join", "application/json", strings.NewReader(`{"code":"nope"}`))
	if code/100 != 4 || !strings.Contains(string(body), `"detail"`) {
		t.Errorf("join with a bad code = %d %s; want 4xx with a detail", code, body)
	}
}
