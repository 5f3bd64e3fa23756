package appliance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"

	"kernelbox/appliance/api"
)

// exportRows asks the API for an export and decodes its lines.
func exportRows(t *testing.T, c *api.Client, q api.ExportQuery) []api.ExportRow {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Export(t.Context(), q, &buf); err != nil {
		t.Fatalf("Export(%+v) = %v", q, err)
	}
	var rows []api.ExportRow
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r api.ExportRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("Export(%+v): line %d: %v", q, len(rows)+1, err)
		}
		rows = append(rows, r)
	}
	return rows
}

func ids(rows []api.ExportRow) []int64 {
	out := []int64{}
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}

// TestExport: the export holds every submission with its code, verdicts
// and scores; the filters narrow it; anonymise hides names behind
// pseudonyms stable within one export only; the CLI writes the same rows
// as JSON lines or parquet.
func TestExport(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newDataBundle(t, t.TempDir())
	ranked, err := b.submit(ctx, b.ann, "leaderboard", "def custom_kernel(x):\n    return x * 2\n", false, pass(0.002))
	if err != nil {
		t.Fatal(err)
	}
	failed, err := b.submit(ctx, b.bob, "leaderboard", "def custom_kernel(x):\n    return x\n", false, fail)
	if err != nil {
		t.Fatal(err)
	}
	tested, err := b.submit(ctx, b.bob, "test", "def custom_kernel(x):\n    return x + x\n", false, pass(0.003))
	if err != nil {
		t.Fatal(err)
	}
	queued, err := b.submit(ctx, b.ann, "test", "# queued\n", true, nil)
	if err != nil {
		t.Fatal(err)
	}

	all := exportRows(t, b.admin, api.ExportQuery{})
	if diff := cmp.Diff([]int64{ranked.ID, failed.ID, tested.ID, queued.ID}, ids(all)); diff != "" {
		t.Fatalf("Export() ids (-want +got):\n%s", diff)
	}
	got := all[0]
	score, scoreErr := 0.002, (*float64)(nil)
	want := api.ExportRow{ID: ranked.ID, User: "ann", Leaderboard: "quick", Problem: "quick", GPUType: "cpu", Mode: "leaderboard",
		Category: api.CategoryRanked, Language: "python", FileName: "submission.py", Code: "def custom_kernel(x):\n    return x * 2\n",
		SHA256: ranked.SHA256, Created: ranked.Created, Finished: &ranked.Finished, Status: api.StatusDone, Passed: true,
		Findings: []string{}, Flags: []string{}, Score: &score, ScoreErr: scoreErr,
		Benchmarks: []api.ExportBenchmark{{Spec: "n: 3", MeanNs: 2e6, ErrNs: 2}, {Spec: "n: 10", MeanNs: 4e6, ErrNs: 3}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Export() row of a ranked submission (-want +got):\n%s", diff)
	}
	if r := all[1]; r.Passed || r.Reason == "" || r.Score != nil || !slicesEqual(r.Flags, []string{"too_fast"}) {
		t.Errorf("Export() row of a failed submission = %+v; want not passed, its reason and its run's flag", r)
	}
	if r := all[3]; r.Status != api.StatusQueued || r.Finished != nil || len(r.Benchmarks) != 0 {
		t.Errorf("Export() row of a queued submission = %+v; want queued, unfinished, no timings", r)
	}

	for _, tt := range []struct {
		q    api.ExportQuery
		want []int64
	}{
		{api.ExportQuery{Passing: true}, []int64{ranked.ID, tested.ID}},
		{api.ExportQuery{Ranked: true}, []int64{ranked.ID, failed.ID}},
		{api.ExportQuery{Passing: true, Ranked: true}, []int64{ranked.ID}},
	} {
		if diff := cmp.Diff(tt.want, ids(exportRows(t, b.admin, tt.q))); diff != "" {
			t.Errorf("Export(%+v) ids (-want +got):\n%s", tt.q, diff)
		}
	}

	anon := exportRows(t, b.admin, api.ExportQuery{Anonymise: true})
	again := exportRows(t, b.admin, api.ExportQuery{Anonymise: true})
	if anon[0].User != anon[3].User || anon[1].User != anon[2].User || anon[0].User == anon[1].User {
		t.Errorf("anonymised users %q %q %q %q; want ann's two alike, bob's two alike, the two apart",
			anon[0].User, anon[3].User, anon[1].User, anon[2].User)
	}
	for i, r := range anon {
		if !strings.HasPrefix(r.User, "user-") || r.User == "ann" || r.User == "bob" {
			t.Errorf("anonymised row %d user = %q; want a pseudonym", i, r.User)
		}
		if r.User == again[i].User {
			t.Errorf("row %d has pseudonym %q in two exports; want them unlinkable", i, r.User)
		}
	}

	// The CLI, both formats.
	out := t.TempDir()
	for _, format := range []string{"jsonl", "parquet"} {
		stdout, errOut, code := runCLI(t, "admin", "export", "--format", format, out, "--server", b.server, "--token", b.token,
			"--client-config", filepath.Join(b.dir, "client.json"))
		if code != 0 || !strings.Contains(stdout, "exported 4 submissions") {
			t.Fatalf("admin export --format %s = exit %d\n%s%s", format, code, stdout, errOut)
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "submissions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n != 4 {
		t.Errorf("submissions.jsonl has %d lines; want 4", n)
	}
	rows, err := parquet.ReadFile[api.ExportRow](filepath.Join(out, "submissions.parquet"))
	if err != nil {
		t.Fatalf("read submissions.parquet: %v", err)
	}
	if diff := cmp.Diff(all, rows, cmp.Comparer(func(a, b []string) bool { return slicesEqual(a, b) }),
		cmp.Comparer(func(a, b []api.ExportBenchmark) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
		t.Errorf("submissions.parquet (-API +file):\n%s", diff)
	}
}

// slicesEqual compares string lists, nil and empty alike (parquet reads
// an empty list back as nil).
func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
