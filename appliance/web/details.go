package web

import (
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"math"
	"net/http"
	"strings"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/gpu"
	"kernelbox/problems"
)

// details is a submission as its page shows it.
type details struct {
	Sub   api.SubmissionView
	Ended bool
	// Position is the public run's place in its GPU type's queue while it
	// waits (0: next), -1 when not queued; ETA the wait from recent runs.
	Position int
	ETA      time.Duration
	Runs     []runView
	// Plot compares the public run's per-shape times with the user's best
	// ranked submission and the leader's, where they are known.
	Plot template.HTML
	// Best is the user's best submission on this leaderboard and GPU type
	// (0: none, or this one).
	Best int64
	// Progress is what the runs said so far while the submission is
	// open: each test's verdict and each phase's end, as they arrive.
	Progress []string
}

func (d details) noScriptRefresh() int {
	if d.Ended {
		return 0
	}
	return 3
}

// runView is one run (the public one, or its secret twin) with its
// harness report decoded.
type runView struct {
	api.Run
	Report    *problems.Report
	Telemetry *gpu.RunTelemetry
	// Series plots the GPU's SM clock and temperature over the run.
	Series template.HTML
}

func (h *Handler) details(r *http.Request, u *store.User, v api.SubmissionView) (details, error) {
	d := details{Sub: v, Ended: api.Ended(v.Status), Position: -1}
	for _, run := range v.Runs {
		rv := runView{Run: run}
		if len(run.Report) > 0 {
			// A report this version cannot read leaves the run's summary:
			// the rest of the page still shows.
			var rep problems.Report
			if err := json.Unmarshal(run.Report, &rep); err != nil {
				h.log.Warn("a run's report does not decode", "submission", v.ID, "run", run.ID, "err", err)
			} else {
				rv.Report = &rep
			}
		}
		if len(run.Telemetry) > 0 {
			var t gpu.RunTelemetry
			if json.Unmarshal(run.Telemetry, &t) == nil && t.Samples > 0 {
				rv.Telemetry = &t
				rv.Series = drawSeries(t.Series)
			}
		}
		d.Runs = append(d.Runs, rv)
	}
	if !d.Ended {
		q, err := h.svc.Queue(r.Context(), u)
		if err != nil {
			return details{}, err
		}
		for _, j := range q.Mine {
			if j.Submission == v.ID && j.State == api.StatusQueued {
				d.Position, d.ETA = j.Position, j.ETA
				break
			}
		}
		if d.Progress, err = h.progress(r, v.ID); err != nil {
			return details{}, err
		}
		return d, nil
	}
	h.plot(r, u, &d)
	return d, nil
}

// progress reads the open submission's test verdicts and phase ends from
// its events, as kernelbox submit prints them.
func (h *Handler) progress(r *http.Request, id int64) ([]string, error) {
	var out []string
	var after int64
	for {
		page, _, err := h.svc.EventsPage(r.Context(), id, after)
		if err != nil {
			return nil, err
		}
		for _, ev := range page.Events {
			p, err := ev.Payload()
			if err != nil {
				continue
			}
			switch p := p.(type) {
			case *api.RunTest:
				out = append(out, fmt.Sprintf("%s %d (%s): %s", p.Phase, p.Index, p.Spec, p.Status))
			case *api.RunPhase:
				verdict := "ok"
				if !p.Passed {
					verdict = "failed: " + p.Reason
				}
				who := "run"
				if p.Secret {
					who = "secret-seed run"
				}
				out = append(out, fmt.Sprintf("%s: %s phase %s in %s", who, p.Phase, verdict, p.Wall.Round(time.Millisecond)))
			case *api.RunStarted:
				out = append(out, "started")
			}
		}
		if len(page.Events) == 0 || page.Next == after {
			return out, nil
		}
		after = page.Next
	}
}

// series is one line of the plot: a name and its mean per shape (ns).
type series struct {
	Name  string
	Means map[string]float64
	Errs  map[string]float64
}

// plot draws the public run's benchmarks beside its owner's best and the
// leader's on the same leaderboard and GPU type (an entry's shapes are
// readable by whoever may read the leaderboard). A line it cannot read
// is left out: the plot is a courtesy beside the run's own figures.
func (h *Handler) plot(r *http.Request, u *store.User, d *details) {
	pub := d.public()
	if pub == nil || pub.Report == nil || len(pub.Report.Benchmarks) == 0 {
		return
	}
	var specs []string
	this := series{Name: "this run", Means: map[string]float64{}, Errs: map[string]float64{}}
	for _, b := range pub.Report.Benchmarks {
		if b.Mean > 0 {
			specs = append(specs, b.Spec)
			this.Means[b.Spec], this.Errs[b.Spec] = b.Mean, b.Err
		}
	}
	if len(specs) == 0 {
		return
	}
	all := []series{this}
	rk, err := h.svc.Ranking(r.Context(), u, d.Sub.Leaderboard, d.Sub.GPUType)
	if err == nil && len(rk.Rankings) == 1 {
		rows := rk.Rankings[0].Rows
		for _, row := range rows {
			if row.User == d.Sub.User && row.Submission != d.Sub.ID {
				d.Best = row.Submission
				if s, ok := h.seriesOf(r, u, d.Sub.Leaderboard, row.Submission, "your best"); ok {
					all = append(all, s)
				}
				break
			}
		}
		if len(rows) > 0 && rows[0].User != d.Sub.User {
			if s, ok := h.seriesOf(r, u, d.Sub.Leaderboard, rows[0].Submission, "leader ("+rows[0].User+")"); ok {
				all = append(all, s)
			}
		}
	}
	d.Plot = drawPlot(specs, all)
}

// seriesOf is a ranked entry's per-shape means, as the API's entry
// endpoint gives them to anyone who may read the leaderboard.
func (h *Handler) seriesOf(r *http.Request, u *store.User, lb string, id int64, name string) (series, bool) {
	e, err := h.svc.Entry(r.Context(), u, lb, id)
	if err != nil {
		return series{}, false
	}
	s := series{Name: name, Means: map[string]float64{}, Errs: map[string]float64{}}
	for _, sh := range e.Shapes {
		s.Means[sh.Spec], s.Errs[sh.Spec] = sh.MeanNs, sh.ErrNs
	}
	return s, true
}

// public is the submission's public run.
func (d *details) public() *runView {
	for i := range d.Runs {
		if !d.Runs[i].Secret {
			return &d.Runs[i]
		}
	}
	return nil
}

// drawPlot draws one row of bars per shape, each row on its own scale
// (shapes differ by orders of magnitude), the run's error as a whisker.
// It is plain SVG in the page: it needs no script and no request.
func drawPlot(specs []string, all []series) template.HTML {
	const width, label, barH, gap = 760, 260, 14, 10
	rowH := len(all)*(barH+2) + gap
	height := len(specs)*rowH + 28
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="plot" role="img" aria-label="mean time per benchmark shape" viewBox="0 0 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`, width, height, width, height)
	for i, s := range all {
		fmt.Fprintf(&b, `<rect x="%d" y="4" width="10" height="10" class="s%d"/><text x="%d" y="13" class="legend">%s</text>`,
			label+i*170, i, label+i*170+14, html.EscapeString(s.Name))
	}
	for i, spec := range specs {
		y0 := 24 + i*rowH
		top := 0.0
		for _, s := range all {
			top = math.Max(top, s.Means[spec]+s.Errs[spec])
		}
		fmt.Fprintf(&b, `<text x="0" y="%d" class="spec">%s</text>`, y0+barH, html.EscapeString(shorten(spec, 40)))
		for j, s := range all {
			m, ok := s.Means[spec]
			if !ok || m <= 0 || top <= 0 {
				continue
			}
			y := y0 + j*(barH+2)
			span := float64(width - label - 90)
			w := m / top * span
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" class="s%d"><title>%s: %s</title></rect>`,
				label, y, w, barH, j, html.EscapeString(s.Name), micros(m))
			if e := s.Errs[spec]; e > 0 {
				x1, x2 := float64(label)+(m-e)/top*span, float64(label)+(m+e)/top*span
				fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" class="err"/>`, x1, x2, y+barH/2, y+barH/2)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="val">%s</text>`, float64(label)+w+4, y+barH-3, micros(m))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // every text in it is escaped above
}

// drawSeries draws the SM clock and the temperature over a run, one
// line each on its own scale, as plain SVG; nothing for fewer than two
// readings.
func drawSeries(pts []gpu.SeriesPoint) template.HTML {
	if len(pts) < 2 {
		return ""
	}
	const width, height, left, right = 760, 150, 70, 20
	span := float64(max(pts[len(pts)-1].Ms, 1))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="plot series" role="img" aria-label="SM clock and temperature over the run" viewBox="0 0 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`, width, 2*height+10, width, 2*height+10)
	lines := []struct {
		name, unit string
		v          func(gpu.SeriesPoint) float64
	}{
		{"SM clock", "MHz", func(p gpu.SeriesPoint) float64 { return float64(p.SMClockMHz) }},
		{"temperature", "°C", func(p gpu.SeriesPoint) float64 { return float64(p.TempC) }},
	}
	for i, l := range lines {
		y0 := i*(height+10) + 18
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range pts {
			lo, hi = math.Min(lo, l.v(p)), math.Max(hi, l.v(p))
		}
		if hi-lo < 1 { // a flat line in the middle, not a divide by zero
			lo, hi = lo-1, hi+1
		}
		h := float64(height - 30)
		fmt.Fprintf(&b, `<text x="0" y="%d" class="legend">%s (%s)</text>`, y0-4, l.name, l.unit)
		fmt.Fprintf(&b, `<text x="0" y="%d" class="val">%.0f</text><text x="0" y="%.0f" class="val">%.0f</text>`, y0+12, hi, float64(y0)+h, lo)
		b.WriteString(`<polyline class="line s` + fmt.Sprint(i) + `" fill="none" points="`)
		for _, p := range pts {
			x := left + float64(p.Ms)/span*float64(width-left-right)
			y := float64(y0) + (hi-l.v(p))/(hi-lo)*h
			fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
		}
		b.WriteString(`"/>`)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="val">0 s</text><text x="%d" y="%d" class="val" text-anchor="end">%.1f s</text>`,
		left, 2*height+8, width-right, 2*height+8, span/1e3)
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and fixed text only
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// micros shows nanoseconds as microseconds with 3 significant figures
// or more.
func micros(ns float64) string {
	us := ns / 1e3
	switch {
	case us >= 100:
		return fmt.Sprintf("%.1f µs", us)
	case us >= 1:
		return fmt.Sprintf("%.2f µs", us)
	}
	return fmt.Sprintf("%.3f µs", us)
}
