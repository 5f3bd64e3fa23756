package appliance

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// TestAPI_WritesOnlyTheContract: every answer is an appliance/api document,
// never a store row, whose own fields (ids to join on, a leaderboard's
// problem directory and its secret seed) are the daemon's business. The
// API runs over the service, store and queue of newRunnerBundle: no root.
func TestAPI_WritesOnlyTheContract(t *testing.T) {
	t.Parallel()
	b := newRunnerBundle(t)
	ctx := t.Context()
	a, err := newAPI(b.svc, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	_, admin, err := b.st.CreateUser(ctx, "root", api.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	_, cleo, err := b.st.CreateUser(ctx, "cleo", api.RoleContestant)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.st.Leaderboard(ctx, "quick")
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{lb.ProblemDir, strconv.FormatInt(lb.SecretSeed, 10), `"ID"`, `"ProblemDir"`, `"SecretSeed"`}
	get := func(token, path string, doc any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d: %s", path, resp.StatusCode, body)
		}
		for _, s := range secrets {
			if strings.Contains(string(body), s) {
				t.Errorf("GET %s shows the store's %q: %s", path, s, body)
			}
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields() // a field that is not the document's is a leak
		if err := dec.Decode(doc); err != nil {
			t.Errorf("GET %s is not its api document: %v: %s", path, err, body)
		}
	}
	for _, token := range []string{cleo, admin} {
		get(token, "/api/me", &api.User{})
		get(token, "/api/leaderboards", &[]api.LeaderboardInfo{})
		get(token, "/api/leaderboards/quick", &api.LeaderboardInfo{})
		get(token, "/api/leaderboards/quick/ranking", &api.Ranking{})
		get(token, "/api/submissions", &[]api.Submission{})
		get(token, "/api/queue", &api.QueueStatus{})
	}
	get(admin, "/api/admin/users", &[]api.User{})
	get(admin, "/api/admin/review", &api.Flagged{})
}

// TestService_CancelRedactsTheSecretRun: a contestant who cancels a
// leaderboard submission whose secret twin has ended first does not get
// that run's report (its cases carry the secret seed) in the answer.
func TestService_CancelRedactsTheSecretRun(t *testing.T) {
	t.Parallel()
	b := newRunnerBundle(t)
	ctx := t.Context()
	lb, err := b.st.Leaderboard(ctx, "quick")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.st.CreateSubmission(ctx, store.NewSubmission{Leaderboard: lb, User: b.user, FileName: "s.py", Code: []byte("x = 1\n"),
		GPUType: "cpu", Mode: "leaderboard", Category: api.CategoryRanked, Secret: true})
	if err != nil {
		t.Fatal(err)
	}
	secret := sub.Runs[1]
	if ok, err := b.st.StartRun(ctx, secret.ID, "lease", "cpu:0"); err != nil || !ok {
		t.Fatalf("StartRun: %v, %v", ok, err)
	}
	if _, err := b.st.FinishRun(ctx, secret.ID, "lease", store.RunResult{Status: api.StatusDone, Passed: true,
		Report: json.RawMessage(`{"tests":[{"spec":"n: 7; seed: 991"}]}`)}); err != nil {
		t.Fatal(err)
	}
	got, err := b.svc.Cancel(ctx, b.user, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got.Runs {
		if r.Secret && (r.Report != nil || r.SystemInfo != nil) {
			t.Errorf("the contestant's cancel answer shows the secret run's report %s", r.Report)
		}
	}
}
