package appliance

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
)

// TestDaemon_RequestEdges: input at the edges is refused with a clear
// error, and a crowd of idle connections cannot take the daemon: a JSON
// body with more after it, a file name with a control character or too
// long, a user name that differs from another only by case; past
// max_connections, a new client waits until one leaves.
func TestDaemon_RequestEdges(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), func(c *Config) { c.MaxConnections = 16 })
	td.loadQuick()
	ctx := t.Context()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, td.server+"/api/admin/users",
		strings.NewReader(`{"name":"cat","role":"contestant"} {"name":"dog"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+td.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.String(), "more after its JSON document") {
		t.Errorf("two JSON documents in one body = %d %s, want 400", resp.StatusCode, body.String())
	}
	if _, err := td.d.store.User(ctx, "cat"); api.ErrorCode(err) != api.CodeNotFound {
		t.Errorf("the refused body made user cat: %v", err)
	}

	code := []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")
	for name, want := range map[string]string{
		"a\x00b.py":                      "control character U+0000",
		"tab\there.py":                   "control character U+0009",
		strings.Repeat("x", 300) + ".py": "at most 255",
	} {
		_, err := td.admin.Submit(ctx, api.SubmitRequest{Leaderboard: "quick", Mode: "test", Code: code, FileName: name})
		if api.ErrorCode(err) != api.CodeInvalid || !strings.Contains(err.Error(), want) {
			t.Errorf("file name %q = %v, want invalid, %q", name[:min(len(name), 20)], err, want)
		}
	}

	if _, err := td.admin.AddUser(ctx, "ann", api.RoleContestant); err != nil {
		t.Fatal(err)
	}
	if _, err := td.admin.AddUser(ctx, "ANN", api.RoleContestant); api.ErrorCode(err) != api.CodeConflict ||
		!strings.Contains(err.Error(), "user ann already exists") {
		t.Errorf("AddUser(ANN) beside ann = %v, want a conflict naming ann", err)
	}

	// 16 idle connections fill the cap (with the clients' own kept-alive
	// ones, more than fill it); another client waits, and is served once
	// they leave.
	addr := strings.TrimPrefix(td.server, "http://")
	var idle []net.Conn
	for range 16 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
		defer c.Close()
	}
	time.Sleep(200 * time.Millisecond) // let the server accept them
	quick := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := quick.Get(td.server + "/api/health"); err == nil {
		resp.Body.Close()
		t.Error("a 17th connection was served while 16 idle ones held the cap")
	}
	for _, c := range idle {
		c.Close()
	}
	waited := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	hreq, _ := http.NewRequestWithContext(hctx, http.MethodGet, td.server+"/api/health", nil)
	resp, err = waited.Do(hreq)
	if err != nil {
		t.Fatalf("health once an idle connection left: %v", err)
	}
	resp.Body.Close()
}

// TestDaemon_SlowBodies: a client that sends its headers and then trickles
// or stops its body is answered, with the reason, once body_timeout has
// passed (a problem set gets five), and nothing it started is kept; a
// slow body used to hold its connection for five minutes.
func TestDaemon_SlowBodies(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), func(c *Config) { c.BodyTimeout = time.Second })
	td.loadQuick()
	addr := strings.TrimPrefix(td.server, "http://")
	uploads := filepath.Join(td.dir, "problems", "uploads")
	before, _ := os.ReadDir(uploads)
	for _, tc := range []struct {
		name, path, first string
		within            time.Duration
	}{
		{"JSON", "/api/admin/users", `{"name":"slow`, 3 * time.Second},
		{"upload", "/api/submissions?leaderboard=quick&mode=test&file_name=k.py", "def custom_kernel(xs):\n", 3 * time.Second},
		{"problem set", "/api/admin/problems", "\x1f\x8b", 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: kb\r\nAuthorization: Bearer %s\r\nContent-Length: 100000\r\n\r\n%s", tc.path, td.token, tc.first)
			_ = c.SetReadDeadline(start.Add(tc.within + 5*time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body after %s: %v", time.Since(start), err)
			}
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			took := time.Since(start)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.String(), "did not arrive within 1s") || took > tc.within {
				t.Errorf("stalled body = %d %s after %s; want 400 naming body_timeout within %s", resp.StatusCode, body.String(), took, tc.within)
			}
		})
	}
	if _, err := td.d.store.User(t.Context(), "slow"); api.ErrorCode(err) != api.CodeNotFound {
		t.Errorf("a stalled body made a user: %v", err)
	}
	subs, err := td.admin.Submissions(t.Context(), "", true, 0)
	if err != nil || len(subs) != 0 {
		t.Errorf("a stalled upload left submissions %v (%v)", subs, err)
	}
	if after, _ := os.ReadDir(uploads); len(after) != len(before) {
		t.Errorf("a stalled problem set left a directory in uploads: %d, before %d", len(after), len(before))
	}
}
