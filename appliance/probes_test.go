package appliance

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAPI_Probes: /healthz answers while the daemon serves; /readyz
// answers 503 with the reasons while the box cannot evaluate, 200 once
// it can, without a token (a balancer or systemd has none).
func TestAPI_Probes(t *testing.T) {
	t.Parallel()
	b := newRunnerBundle(t)
	a, err := newAPI(b.svc, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz on a healthy box = %d %q", code, body)
	}
	// Set between two servers, so no handler reads it as it changes.
	srv.Close()
	b.svc.health = []string{"the sandbox cannot start: no cgroup v2"}
	srv = httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "degraded\nthe sandbox cannot start") {
		t.Errorf("/readyz on a degraded box = %d %q, want 503 with the reason", code, body)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
}
