package appliance

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"kernelbox/appliance/api"
)

// TestDaemon_Metrics: /metrics counts what a contestant did, by outcome
// (a pass, a failure, a rate-limited refusal), and reads the queue and
// the slots as /api/gpus does, in Prometheus's text format, no token.
func TestDaemon_Metrics(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	if _, errOut, code := td.cli(td.token, "admin", "leaderboard", "quick", "--rate-limit", "test=2"); code != 0 {
		t.Fatalf("set the rate limit: exit %d: %s", code, errOut)
	}
	_, ann := td.user("ann")
	if _, errOut, code := td.cli(ann, "submit", quickSolution("correct/double.py")); code != api.ExitOK {
		t.Fatalf("submit correct: exit %d: %s", code, errOut)
	}
	if _, errOut, code := td.cli(ann, "submit", quickSolution("wrong/zero_last.py")); code != api.ExitFailed {
		t.Fatalf("submit wrong: exit %d: %s", code, errOut)
	}
	if _, errOut, code := td.cli(ann, "submit", quickSolution("correct/double.py")); code == api.ExitOK || !strings.Contains(errOut, "rate limit") {
		t.Fatalf("a third test in the hour: exit %d %s, want the rate limit", code, errOut)
	}

	families := scrape(t, td.server)
	value := func(name string, labels map[string]string) (float64, bool) {
		return metricValue(families, name, labels)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"kernelbox_runs_total", map[string]string{"gpu_type": "cpu", "mode": "test", "outcome": "passed"}, 1},
		{"kernelbox_runs_total", map[string]string{"gpu_type": "cpu", "mode": "test", "outcome": "failed"}, 1},
		{"kernelbox_run_duration_seconds", map[string]string{"gpu_type": "cpu", "mode": "test"}, 2},
		{"kernelbox_submissions_total", map[string]string{"gpu_type": "cpu", "mode": "test"}, 2},
		{"kernelbox_submissions_refused_total", map[string]string{"reason": "rate_limit"}, 1},
		{"kernelbox_slots", map[string]string{"gpu_type": "cpu", "state": "idle"}, 2},
		{"kernelbox_slots", map[string]string{"gpu_type": "cpu", "state": "running"}, 0},
		{"kernelbox_slots", map[string]string{"gpu_type": "cpu", "state": "drained"}, 0},
		{"kernelbox_queue_jobs", map[string]string{"gpu_type": "cpu", "class": "ranked", "state": "running"}, 0},
		{"kernelbox_ready", nil, 1},
		{"kernelbox_http_requests_total", map[string]string{"route": "/api/submissions", "method": "POST", "code": "202"}, 2},
		{"kernelbox_http_requests_total", map[string]string{"route": "/api/submissions", "method": "POST", "code": "429"}, 1},
	} {
		got, ok := value(tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	verdicts := 0.0
	for _, m := range families["kernelbox_sandbox_verdicts_total"].GetMetric() {
		verdicts += m.GetCounter().GetValue()
	}
	if verdicts != 2 {
		t.Errorf("kernelbox_sandbox_verdicts_total = %v in all, want 2 (one sandbox a run)", verdicts)
	}
	if n, ok := value("kernelbox_queue_jobs", map[string]string{"gpu_type": "cpu", "class": "test", "state": "queued"}); !ok || n != 0 {
		t.Errorf("kernelbox_queue_jobs{cpu,test,queued} = %v (found %v) with every run ended, want 0", n, ok)
	}
	if _, ok := families["process_resident_memory_bytes"]; !ok {
		t.Error("no process metrics")
	}
}

// scrape GETs server's /metrics and parses Prometheus's text format.
func scrape(t *testing.T, server string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(server + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus's text format: %v", err)
	}
	return families
}

// metricValue is the value of the first series of name whose labels
// include labels (a histogram's: its count), and whether there is one.
func metricValue(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
metric:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if got[k] != v {
				continue metric
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetrics_EmptyQueue: with nothing queued, the queue's depths are
// series at 0, for every class and state of the GPU types the box
// serves, not absent: a dashboard plots them and an alert compares them
// from the first scrape. (TestDaemon_Metrics checks the slots' states,
// which need a whole daemon's runner.)
func TestMetrics_EmptyQueue(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	families := scrape(t, srv.URL)
	for _, class := range []string{"test", "ranked"} {
		for _, state := range []string{"queued", "leased", "running"} {
			labels := map[string]string{"gpu_type": "cpu", "class": class, "state": state}
			if got, ok := metricValue(families, "kernelbox_queue_jobs", labels); !ok || got != 0 {
				t.Errorf("kernelbox_queue_jobs%v = %v (found %v), want 0", labels, got, ok)
			}
		}
	}
}

// apiServer serves a runner bundle's API (no runner started) on a test
// listener.
func apiServer(t *testing.T) *httptest.Server {
	t.Helper()
	b := newRunnerBundle(t)
	a, err := newAPI(b.svc, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// TestMetrics_RootRoute: the web root's requests are labelled "/", the
// path, not its pattern "/{$}".
func TestMetrics_RootRoute(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	families := scrape(t, srv.URL)
	if got, ok := metricValue(families, "kernelbox_http_requests_total", map[string]string{"route": "/", "method": "GET"}); !ok || got != 1 {
		t.Errorf(`kernelbox_http_requests_total{route="/",method="GET"} = %v (found %v), want 1`, got, ok)
	}
	for _, m := range families["kernelbox_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "route" && strings.Contains(l.GetValue(), "{$}") {
				t.Errorf("a request is labelled route=%q; want the path, without {$}", l.GetValue())
			}
		}
	}
}

// TestAPI_Download: /download lists the configured directory's files
// with their sums and serves each by name, without a token; nothing
// outside the directory, no link and no hidden file is served.
func TestAPI_Download(t *testing.T) {
	t.Parallel()
	b := newRunnerBundle(t)
	dir := t.TempDir()
	bin := []byte("#!/bin/sh\necho kernelbox\n")
	sum := sha256.Sum256(bin)
	for name, body := range map[string][]byte{
		"kernelbox-linux-amd64": bin,
		"SHA256SUMS":            []byte(hex.EncodeToString(sum[:]) + "  kernelbox-linux-amd64\n"),
		".hidden":               []byte("no"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	b.svc.cfg.Downloads = dir
	a, err := newAPI(b.svc, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := get("/download/")
	if code != http.StatusOK || !strings.Contains(body, `href="kernelbox-linux-amd64"`) || !strings.Contains(body, hex.EncodeToString(sum[:])) ||
		!strings.Contains(body, strconv.Itoa(len(bin))) || strings.Contains(body, ".hidden") || strings.Contains(body, `href="link"`) {
		t.Errorf("GET /download/ = %d\n%s\nwant the binary with its size and sum, not the hidden file or the link", code, body)
	}
	if code, body := get("/download/kernelbox-linux-amd64"); code != http.StatusOK || body != string(bin) {
		t.Errorf("GET the binary = %d %q", code, body)
	}
	for _, p := range []string{"/download/link", "/download/.hidden", "/download/..%2fsecret", "/download/nope"} {
		if code, body := get(p); code != http.StatusNotFound || strings.Contains(body, "token") {
			t.Errorf("GET %s = %d %q, want 404", p, code, body)
		}
	}
	// Set between two servers, so no handler reads it as it changes.
	srv.Close()
	b.svc.cfg.Downloads = filepath.Join(dir, "missing")
	srv = httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	if code, body := get("/download/"); code != http.StatusOK || !strings.Contains(body, "none: this box has no client builds") {
		t.Errorf("GET /download/ with no directory = %d %q", code, body)
	}
}
