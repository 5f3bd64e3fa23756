package problems

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Fuzz targets for what the box parses from problem authors, ncu and the
// harness (issue 18). `go test` runs each on its seeds; `go test -fuzz
// FuzzX ./problems` explores.

func FuzzParseExpr(f *testing.F) {
	for _, s := range []string{"rows / (k - 3)", "3 * n * 2", "2 * n ** 3", "max(m, 16) * k", "((", "1e308 ** 9", "-n", "a /", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := ParseExpr(src)
		if err != nil {
			if e != nil {
				t.Fatalf("ParseExpr(%q) gave an expression and an error", src)
			}
			return
		}
		if e.String() != src {
			t.Errorf("String() = %q, want the source %q", e.String(), src)
		}
		vars := map[string]float64{"n": 3, "m": 0, "k": 3, "rows": -1, "a": 1e300}
		_, _ = e.Eval(vars) // any value or error, never a panic
	})
}

func FuzzParseNCUDetails(f *testing.F) {
	if real, err := os.ReadFile(filepath.Join("testdata", "fakencu", "details.csv")); err == nil {
		f.Add(real)
	}
	f.Add([]byte(`"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"` + "\n" + `"0","k","S","m","%","1,5"` + "\n"))
	f.Add([]byte("\"unterminated\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		ks, err := ParseNCUDetails(bytes.NewReader(data))
		if err != nil && len(ks) > 0 {
			t.Fatalf("kernels and an error: %d, %v", len(ks), err)
		}
	})
}

func FuzzTestProgress(f *testing.F) {
	f.Add([]byte("test-count: 3\ntest.0.spec: n: 1\ntest.0.status: pass\ntest.1.status: fail\ntest.1.error: boom\n"), 7)
	f.Add([]byte("test.99999999999999999999.status: pass\ntest.-1.status: pass\n\r\n"), 1)
	f.Fuzz(func(t *testing.T, data []byte, chunk int) {
		if chunk <= 0 || chunk > 4096 {
			chunk = 64
		}
		n := 0
		p := newTestProgress(1<<16, func(TestResult) { n++ })
		for i := 0; i < len(data); i += chunk {
			if w, err := p.Write(data[i:min(i+chunk, len(data))]); err != nil || w != min(chunk, len(data)-i) {
				t.Fatalf("Write = %d, %v", w, err)
			}
		}
		if n > maxProgressTests {
			t.Errorf("%d reports, over the cap %d", n, maxProgressTests)
		}
	})
}

func FuzzLoadCompetition(f *testing.F) {
	f.Add([]byte("name: c\ndeadline: 2100-12-31\nproblems:\n  - {directory: p, gpus: [H200]}\n"))
	f.Add([]byte("name: c\nproblems:\n  - {directory: p}\n  - {directory: p}\n  - {directory: ../../etc}\n"))
	f.Add([]byte("problems: [3, {name: x}]\n"))
	dir := f.TempDir()
	p := filepath.Join(dir, "p")
	if err := os.MkdirAll(p, 0o755); err != nil {
		f.Fatal(err)
	}
	for name, body := range map[string]string{"task.yml": validTask, "reference.py": "", "eval.py": "", "tmpl.py": ""} {
		if err := os.WriteFile(filepath.Join(p, name), []byte(body), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(t.TempDir(), "comp.yaml")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		// The competition lies beside p through a link, so that its
		// directories resolve as in a real set.
		if err := os.Symlink(p, filepath.Join(filepath.Dir(file), "p")); err != nil {
			t.Fatal(err)
		}
		c, err := LoadCompetition(file)
		if err != nil {
			if c != nil {
				t.Fatal("a competition and an error")
			}
			return
		}
		seen := map[string]bool{}
		for _, pr := range c.Problems {
			if pr.Task == nil || pr.Name == "" || seen[pr.Name] {
				t.Fatalf("problem %+v: no task, no name, or a name twice", pr)
			}
			seen[pr.Name] = true
		}
		for _, b := range c.Bad {
			if b.Err == nil || !strings.Contains(b.Err.Error(), "comp.yaml") {
				t.Fatalf("bad problem %+v without an error naming the file", b)
			}
		}
	})
}
