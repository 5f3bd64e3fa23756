package web

import (
	"fmt"
	"html/template"
	"io/fs"
	"slices"
	"strings"
	"time"

	"kernelbox/appliance/api"
)

// parsePages parses each page's template with the layout around it and
// the shared parts (parts.html) beside it.
// A page file may define "live", the part a running page reloads:
// it is served alone as PAGE-live.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("web templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, f := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "templates/"), ".html")
		if name == "layout" || name == "parts" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/parts.html", f)
		if err != nil {
			return nil, fmt.Errorf("web template %s: %w", name, err)
		}
		pages[name] = t
		if live := t.Lookup("live"); live != nil {
			// Executed as "layout" by render: a layout that is the live part.
			lt, err := template.New(name+"-live").Funcs(funcs).ParseFS(assets, "templates/parts.html", f)
			if err != nil {
				return nil, fmt.Errorf("web template %s: %w", name, err)
			}
			if _, err := lt.New("layout").Parse(`{{template "live" .}}`); err != nil {
				return nil, fmt.Errorf("web template %s: %w", name, err)
			}
			pages[name+"-live"] = lt
		}
	}
	return pages, nil
}

var funcs = template.FuncMap{
	"micros": micros,
	// score shows a score (seconds) in microseconds.
	"score": func(s *float64) string {
		if s == nil {
			return "–"
		}
		return micros(*s * 1e9)
	},
	"secs": func(s float64) string { return micros(s * 1e9) },
	// rank shows a rank, the top three as gold, silver and bronze badges
	// (drawn by the style sheet: no emoji font is needed).
	"rank": func(rank int) template.HTML {
		if rank >= 1 && rank <= 3 {
			name := [...]string{"gold", "silver", "bronze"}[rank-1]
			return template.HTML(fmt.Sprintf(`<span class="medal %s" title="%s">%d</span>`, name, name, rank)) //nolint:gosec // no user text
		}
		return template.HTML(fmt.Sprint(rank)) //nolint:gosec // a number
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"dur": func(d time.Duration) string {
		if d <= 0 {
			return "–"
		}
		return d.Round(100 * time.Millisecond).String()
	},
	"took": func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() {
			return "–"
		}
		return b.Sub(a).Round(100 * time.Millisecond).String()
	},
	"top":    func(rows []api.RankRow, n int) []api.RankRow { return rows[:min(n, len(rows))] },
	"staff":  func(r api.Role) bool { return r.Staff() },
	"join":   strings.Join,
	"plus1":  func(i int) int { return i + 1 },
	"offers": slices.Contains[[]string],
}
