package api

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// A follower whose server is out of reach is told so, once, and again
// when the server answers; it waits on meanwhile.
func TestClient_WaitWithUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the server is down
	c, err := NewClient("http://"+addr, "tok")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/submissions/7/events", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"events":[],"next":1,"done":true,"status":"done"}`))
	})
	mux.HandleFunc("GET /api/submissions/7", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"id":7,"status":"done","passed":true}`))
	})
	srv := &http.Server{Handler: mux}
	t.Cleanup(func() { srv.Close() })
	var mu sync.Mutex
	var told []error
	start := sync.OnceFunc(func() {
		// The server comes back two polls later, where it was.
		time.AfterFunc(1500*time.Millisecond, func() {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			go func() { _ = srv.Serve(ln) }()
		})
	})
	v, err := c.WaitWith(t.Context(), 7, nil, WaitOptions{Poll: time.Second, Unreachable: func(err error) {
		mu.Lock()
		told = append(told, err)
		mu.Unlock()
		start()
	}})
	if err != nil || v.ID != 7 || !v.Passed {
		t.Fatalf("WaitWith = %+v, %v; want submission 7, passed", v, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 2 || told[0] == nil || !strings.Contains(told[0].Error(), "cannot reach the server") || told[1] != nil {
		t.Errorf("Unreachable was called with %v; want the error once, then nil once it answered", told)
	}
}
