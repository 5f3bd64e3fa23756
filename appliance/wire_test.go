package appliance

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAPI_WritesOnlyTheContract: every answer is built from appliance/api's
// documents, never from the store's rows, whose extra fields (ids to join
// on, a leaderboard's problem directory and its secret seed) are the
// daemon's business.
func TestAPI_WritesOnlyTheContract(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	if _, errOut, code := td.cli(td.token, "submit", quickSolution("correct/double.py"), "--mode", "leaderboard"); code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	get := func(path string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, td.server+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+td.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d: %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	for _, path := range []string{"/api/me", "/api/leaderboards", "/api/leaderboards/quick", "/api/submissions?all=1",
		"/api/submissions/1", "/api/admin/users", "/api/admin/review", "/api/leaderboards/quick/ranking"} {
		body := get(path)
		for _, leak := range []string{`"ID"`, `"ProblemDir"`, `"SecretSeed"`, "secret_seed", "problem_dir"} {
			if strings.Contains(body, leak) {
				t.Errorf("GET %s shows the store's %s: %s", path, leak, body)
			}
		}
	}
}
