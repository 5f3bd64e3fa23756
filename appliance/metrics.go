package appliance

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/queue"
	"kernelbox/sandbox"
)

// The daemon's Prometheus metrics (GET /metrics). Events are counted where
// they happen (a run ends, a sandbox exits, a submission is refused, a
// request is answered); states (queue depths, GPU readings) are read at
// scrape time from the queue and the runner's slots, so they cannot
// drift from what /api/queue and /api/gpus say. A registry of the
// daemon's own, not the global one: two daemons in one test process must
// not share counters. Labels are GPU types, modes, classes, routes and
// verdicts, never users or submissions: their number stays small.

type metrics struct {
	reg        *prometheus.Registry
	runs       *prometheus.CounterVec
	runSeconds *prometheus.HistogramVec
	verdicts   *prometheus.CounterVec
	accepted   *prometheus.CounterVec
	refused    *prometheus.CounterVec
	requests   *prometheus.CounterVec
	reqSeconds *prometheus.HistogramVec
	canaryOK   *prometheus.GaugeVec
	canarySecs *prometheus.GaugeVec
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kernelbox_runs_total",
		Help: "Runs ended, by GPU type, mode and outcome: passed, failed (the submission's verdict), box_error and throttled (the box's failures: the run is tried again)."},
		[]string{"gpu_type", "mode", "outcome"})
	m.runSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kernelbox_run_duration_seconds",
		Help:    "Time a run held its slot, from the gate to the result, by GPU type and mode.",
		Buckets: []float64{0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}},
		[]string{"gpu_type", "mode"})
	m.verdicts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kernelbox_sandbox_verdicts_total",
		Help: "Sandboxed processes ended, by the sandbox's verdict (ok, nonzero_exit, timeout, oom, killed, sandbox_error...)."},
		[]string{"verdict"})
	m.accepted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kernelbox_submissions_total",
		Help: "Submissions accepted, by GPU type and mode."}, []string{"gpu_type", "mode"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kernelbox_submissions_refused_total",
		Help: "Submissions refused by a limit, by reason (rate_limit, queue_cap, scanner)."}, []string{"reason"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kernelbox_http_requests_total",
		Help: "HTTP requests answered, by route pattern, method and status code."}, []string{"route", "method", "code"})
	m.reqSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kernelbox_http_request_duration_seconds",
		Help: "Time to answer an HTTP request (long-polls included), by route pattern.", Buckets: prometheus.DefBuckets},
		[]string{"route"})
	m.canaryOK = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kernelbox_canary_ok",
		Help: "1 when the GPU type's last canary (a bundled problem evaluated through the contestants' path) passed, 0 when it failed."},
		[]string{"gpu_type"})
	m.canarySecs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kernelbox_canary_duration_seconds",
		Help: "How long the GPU type's last canary took."}, []string{"gpu_type"})
	m.reg.MustRegister(m.runs, m.runSeconds, m.verdicts, m.accepted, m.refused, m.requests, m.reqSeconds, m.canaryOK, m.canarySecs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Run counts a run's end; wall is zero for one that never ran.
func (m *metrics) Run(gpuType, mode, outcome string, wall time.Duration) {
	m.runs.WithLabelValues(gpuType, mode, outcome).Inc()
	if wall > 0 {
		m.runSeconds.WithLabelValues(gpuType, mode).Observe(wall.Seconds())
	}
}

// Canary keeps a GPU type's last canary.
func (m *metrics) Canary(c api.Canary) {
	ok := 0.0
	if c.OK {
		ok = 1
	}
	m.canaryOK.WithLabelValues(c.GPUType).Set(ok)
	m.canarySecs.WithLabelValues(c.GPUType).Set(c.Took.Seconds())
}

// refusal counts a submission a limit refused; other errors are not
// counted here (they are the caller's mistakes, seen in HTTP codes).
func (m *metrics) refusal(err error, scanner bool) {
	switch {
	case scanner:
		m.refused.WithLabelValues("scanner").Inc()
	case api.ErrorCode(err) != api.CodeExhausted:
	case strings.Contains(err.Error(), "rate limit:"):
		m.refused.WithLabelValues("rate_limit").Inc()
	default:
		m.refused.WithLabelValues("queue_cap").Inc()
	}
}

// countVerdicts counts every sandboxed process's verdict on its way back.
type countVerdicts struct {
	runner.SandboxRunner
	m *metrics
}

func (c countVerdicts) Run(ctx context.Context, s sandbox.Spec) (*sandbox.Result, error) {
	res, err := c.SandboxRunner.Run(ctx, s)
	if err != nil {
		c.m.verdicts.WithLabelValues(string(sandbox.VerdictSandboxErr)).Inc()
	} else {
		c.m.verdicts.WithLabelValues(string(res.Verdict)).Inc()
	}
	return res, err
}

// instrument counts and times every request by the pattern that routed
// it (the mux sets r.Pattern), so paths with ids do not each make a series.
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		begin := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "none"
		} else if _, p, ok := strings.Cut(route, " "); ok {
			route = p // the method is a label of its own
		}
		// "{$}" anchors a pattern at the path's end ("/{$}" is the root
		// alone, not every path under it): the label is the path.
		route = strings.TrimSuffix(route, "{$}")
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(sw.code)).Inc()
		m.reqSeconds.WithLabelValues(route).Observe(time.Since(begin).Seconds())
	})
}

// statusWriter remembers the status code; Unwrap keeps the response
// controller's deadlines and flushes working through it.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.wrote = true
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// stateCollector reads the queue and the slots at scrape time.
type stateCollector struct {
	svc                                           *Service
	ready                                         func(context.Context) bool
	queued, slots, temp, clock, power, mem, procs *prometheus.Desc
	up                                            *prometheus.Desc
}

func newStateCollector(svc *Service, ready func(context.Context) bool) *stateCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &stateCollector{svc: svc, ready: ready,
		queued: d("kernelbox_queue_jobs", "Unfinished jobs by GPU type, class (test, ranked) and state (queued, leased, running).", "gpu_type", "class", "state"),
		slots:  d("kernelbox_slots", "Slots by GPU type and state (idle, running, drained).", "gpu_type", "state"),
		temp:   d("kernelbox_gpu_temperature_celsius", "A GPU's temperature.", "slot", "gpu_type"),
		clock:  d("kernelbox_gpu_sm_clock_mhz", "A GPU's SM clock.", "slot", "gpu_type"),
		power:  d("kernelbox_gpu_power_watts", "A GPU's power draw.", "slot", "gpu_type"),
		mem:    d("kernelbox_gpu_memory_used_bytes", "A GPU's used memory.", "slot", "gpu_type"),
		procs:  d("kernelbox_gpu_compute_processes", "Compute processes on a GPU (0 when idle and healthy).", "slot", "gpu_type"),
		up:     d("kernelbox_ready", "1 when the box takes submissions, 0 when it cannot (see /readyz)."),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queued, c.slots, c.temp, c.clock, c.power, c.mem, c.procs, c.up} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ready := 0.0
	if c.ready(ctx) {
		ready = 1
	}
	gauge(c.up, ready)
	c.collectQueue(ctx, ch, gauge)
	st, err := c.svc.GPUs()
	if err != nil {
		return // the runner has not started: no slots to show
	}
	// Every state of every type the box serves, 0 when no slot is in it
	// (as the queue's depths).
	bySlots := map[[2]string]int{}
	for _, s := range st.Slots {
		for _, state := range slotStates {
			bySlots[[2]string{s.GPUType, state}] += 0
		}
		bySlots[[2]string{s.GPUType, s.State}]++
		if t := s.Now; t != nil {
			gauge(c.temp, float64(t.TempC), s.ID, s.GPUType)
			gauge(c.clock, float64(t.SMClockMHz), s.ID, s.GPUType)
			gauge(c.power, float64(t.PowerMW)/1000, s.ID, s.GPUType)
			gauge(c.mem, float64(t.MemUsed), s.ID, s.GPUType)
			gauge(c.procs, float64(t.Processes), s.ID, s.GPUType)
		}
	}
	for k, n := range bySlots {
		gauge(c.slots, float64(n), k[0], k[1])
	}
}

// slotStates are a slot's states (api.SlotState), each a series of
// kernelbox_slots.
var slotStates = []string{"idle", "running", "canary", "drained"}

// queueStates are the states of an unfinished job, each a series of
// kernelbox_queue_jobs.
var queueStates = []queue.State{queue.Queued, queue.Leased, queue.Running}

// collectQueue reports the queue's depths: every GPU type the box serves
// and every type with jobs, by class and state, 0 when none. A series that is there at 0, rather than absent when the queue
// is empty, is one a dashboard can plot and an alert (queue_jobs > N)
// can compare, without `or vector(0)`.
func (c *stateCollector) collectQueue(ctx context.Context, ch chan<- prometheus.Metric, gauge func(*prometheus.Desc, float64, ...string)) {
	counts, err := c.svc.queue.Counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.queued, err)
		return
	}
	type key struct {
		gpuType, class string
		state          queue.State
	}
	n := map[key]int{}
	types := map[string]bool{}
	for _, t := range c.svc.gpuTypes() {
		types[t] = true
	}
	for _, cnt := range counts {
		class := "test"
		if cnt.Class == queue.ClassRanked {
			class = "ranked"
		}
		n[key{cnt.GPUType, class, cnt.State}] += cnt.N
		types[cnt.GPUType] = true
	}
	for t := range types {
		for _, class := range []string{"test", "ranked"} {
			for _, state := range queueStates {
				gauge(c.queued, float64(n[key{t, class, state}]), t, class, string(state))
			}
		}
	}
}

// handler serves the registry, the state collector registered once the
// service is whole.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
