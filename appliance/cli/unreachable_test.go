package cli

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `submissions show --wait` says so while the box is out of reach, once,
// and when it answers again, rather than wait in silence (stderr: stdout
// stays the document).
func TestSubmissionsShowWait_Unreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the box is down
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/submissions/7/events", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"events":[],"next":1,"done":true,"status":"done"}`))
	})
	mux.HandleFunc("GET /api/submissions/7", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"id":7,"leaderboard":"quick","user":"ann","status":"done","passed":true,"mode":"test"}`))
	})
	srv := &http.Server{Handler: mux}
	t.Cleanup(func() { srv.Close() })
	// It comes back a few seconds later, where it was.
	time.AfterFunc(2500*time.Millisecond, func() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		go func() { _ = srv.Serve(ln) }()
	})
	out, errOut, code := runCLI(t, "submissions", "show", "7", "--wait", "--server", "http://"+addr, "--token", "tok",
		"--client-config", filepath.Join(t.TempDir(), "none.json"))
	if code != 0 || !strings.Contains(out, "submission 7 by ann") {
		t.Fatalf("submissions show --wait = exit %d:\n%s\n%s", code, out, errOut)
	}
	if n := strings.Count(errOut, "the box is unreachable, retrying"); n != 1 || !strings.Contains(errOut, "the box answers again") {
		t.Errorf("stderr says it is unreachable %d times (want once, then that it answers again):\n%s", n, errOut)
	}
}
