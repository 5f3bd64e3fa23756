package appliance

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/appliance/store"
)

// fuzzRoutes are the endpoints FuzzAPI sends bodies and queries to: every
// one that reads a JSON body or a query.
var fuzzRoutes = []struct{ method, path string }{
	{http.MethodPost, "/api/submissions"},
	{http.MethodGet, "/api/submissions"},
	{http.MethodGet, "/api/submissions/1/events"},
	{http.MethodGet, "/api/leaderboards/quick/ranking"},
	{http.MethodPost, "/api/join"},
	{http.MethodPost, "/api/register"},
	{http.MethodPost, "/api/admin/users"},
	{http.MethodPost, "/api/admin/users/ann/ban"},
	{http.MethodPost, "/api/admin/users/ann/tokens"},
	{http.MethodPost, "/api/admin/invites"},
	{http.MethodPatch, "/api/admin/leaderboards/quick"},
	{http.MethodPost, "/api/admin/submissions/1/review"},
	{http.MethodPost, "/api/admin/submissions/1/hacked"},
	{http.MethodPost, "/api/admin/gpus/cpu:0/drain"},
}

// FuzzAPI: whatever JSON body and query a client sends to the API, as a
// contestant or as the admin, the answer is a JSON document and never a
// 500: bad input is the client's error, said as such (issue 18).
func FuzzAPI(f *testing.F) {
	f.Add(uint8(0), true, "", []byte(`{"leaderboard":"quick","mode":"test","code":"ZGVmIGN1c3RvbV9rZXJuZWwoeHMpOgogICAgcmV0dXJuIHhzCg=="}`))
	f.Add(uint8(0), false, "", []byte(`{"leaderboard":"quick","mode":"leaderboard","code":"","file_name":"a\u0000.py"}`))
	f.Add(uint8(1), false, "limit=-1&status=bogus&all=true", []byte(nil))
	f.Add(uint8(2), true, "after=-5&wait=1h", []byte(nil))
	f.Add(uint8(3), false, "gpu=%00", []byte(nil))
	f.Add(uint8(6), true, "", []byte(`{"name":"Zed","role":"wizard"}`))
	f.Add(uint8(9), true, "", []byte(`{"role":"organiser","uses":-3,"expires":"yesterday","leaderboards":["nope"]}`))
	f.Add(uint8(10), true, "", []byte(`{"deadline":"2100-01-01T00:00:00Z","rate_limits":{"bogus":-1},"visibility":"secret"}`))
	f.Add(uint8(13), true, "", []byte(`{"reason":"x"} {}`))
	f.Add(uint8(5), false, "", []byte(`{"invite":"inv_nope","name":"`+string(bytes.Repeat([]byte("a"), 100))+`"}`))

	svc, st := quickService(f, "quick")
	_, admin, err := st.CreateUser(f.Context(), "root", api.RoleAdmin)
	if err != nil {
		f.Fatal(err)
	}
	_, ann, err := st.CreateUser(f.Context(), "ann", api.RoleContestant)
	if err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := newAPI(svc, log)
	if err != nil {
		f.Fatal(err)
	}
	a.maxWait = 10 * time.Millisecond
	handler := a.Handler()

	f.Fuzz(func(t *testing.T, route uint8, asAdmin bool, query string, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequest(rt.method, rt.path, bytes.NewReader(body))
		req.URL.RawQuery = query
		token := ann
		if asAdmin {
			token = admin
		}
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s?%s with %q: %d %s", rt.method, rt.path, query, body, rec.Code, rec.Body.String())
		}
		if !json.Valid(rec.Body.Bytes()) && rec.Code != http.StatusOK {
			t.Fatalf("%s %s: answer %d is not JSON: %q", rt.method, rt.path, rec.Code, rec.Body.String())
		}
	})
}

// quickService is a Service over a real store in a temporary directory,
// one CPU slot, and testdata/quick loaded as leaderboard name: enough to
// submit and read without a sandbox.
func quickService(tb testing.TB, name string) (*Service, *store.Store) {
	tb.Helper()
	dir := tb.TempDir()
	st, err := store.Open(tb.Context(), filepath.Join(dir, "kernelbox.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	cfg := DefaultConfig()
	cfg.DataDir = dir
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := newService(cfg, st, st.Queue(), log, time.Now, "boot-test")
	svc.offer(runner.CPUSlots(1, nil))
	quick, err := filepath.Abs(filepath.Join("testdata", "quick"))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := svc.loadProblemSet(tb.Context(), quick, api.ProblemLoad{Name: name}, store.LoadOptions{Source: store.SourceUpload}); err != nil {
		tb.Fatal(err)
	}
	return svc, st
}
