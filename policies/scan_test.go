package policies

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func rulesOf(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		if !slices.Contains(out, f.Rule) {
			out = append(out, f.Rule)
		}
	}
	return out
}

// TestScan: each family is found with its verdict; the honest look-alikes
// beside them are not.
func TestScan(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		code string
		want []string
		v    ScanVerdict
	}{
		"event patch":       {"import torch\ntorch.cuda.Event.elapsed_time = lambda s, e: 0.001\n", []string{"TIMER_PATCH"}, ScanReject},
		"sync patch":        {"torch.cuda.synchronize = lambda: None\n", []string{"TIMER_PATCH"}, ScanReject},
		"perf_counter":      {"import time\ntime.perf_counter_ns = lambda: 0\n", []string{"TIMER_PATCH"}, ScanReject},
		"setattr timer":     {"setattr(torch.cuda, 'synchronize', f)\n", []string{"TIMER_PATCH"}, ScanReject},
		"reference import":  {"from reference import generate_input\n", []string{"HARNESS_PATCH"}, ScanReject},
		"harness import":    {"import eval as h\n", []string{"HARNESS_PATCH"}, ScanReject},
		"sys.modules":       {"import sys\nsys.modules['eval'].stats = lambda t: t\n", []string{"HARNESS_PATCH"}, ScanReject},
		"allclose patch":    {"torch.allclose = lambda *a, **k: True\n", []string{"HARNESS_PATCH"}, ScanReject},
		"generator patch":   {"torch.randn = lambda *a, **k: torch.zeros(*a)\nx = torch.randn(3)\n", []string{"HARNESS_PATCH"}, ScanReject},
		"fd write":          {"import os\nos.write(3, b'check: pass\\n')\n", []string{"RESULT_FORGERY"}, ScanReject},
		"fake result line":  {"print('benchmark.0.mean: 1.0')\n", []string{"RESULT_FORGERY"}, ScanReject},
		"env fd":            {"fd = int(os.environ['POPCORN_FD'])\n", []string{"RESULT_FORGERY", "EVALUATOR_INSPECTION"}, ScanReject},
		"pip":               {"os.system('pip install triton-nightly')\n", []string{"PACKAGE_INSTALL", "THREADS"}, ScanReject},
		"pip module":        {"subprocess.run([sys.executable, '-m', 'pip', 'install', 'x'])\n", []string{"PACKAGE_INSTALL"}, ScanReject},
		"gc scan":           {"import gc\nfor o in gc.get_objects():\n    pass\n", []string{"EVALUATOR_INSPECTION"}, ScanFlag},
		"frame walk":        {"f = sys._getframe(1).f_globals\n", []string{"EVALUATOR_INSPECTION"}, ScanFlag},
		"mode branch":       {"if 'leaderboard' in sys.argv:\n", []string{"EVALUATOR_INSPECTION"}, ScanFlag},
		"id cache":          {"if id(data) in _seen:\n    return _seen[id(data)]\n", []string{"IDENTITY_CACHE"}, ScanFlag},
		"pointer cache":     {"out = cache.get(a.data_ptr())\n", []string{"IDENTITY_CACHE"}, ScanFlag},
		"side stream":       {"s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n", []string{"SIDE_STREAM"}, ScanFlag},
		"native stream":     {"cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);\n", []string{"SIDE_STREAM"}, ScanFlag},
		"threads":           {"import threading\n", []string{"THREADS"}, ScanFlag},
		"subprocess":        {"import subprocess\n", []string{"THREADS"}, ScanFlag},
		"tensor subclass":   {"class Lazy(torch.Tensor):\n    pass\n", []string{"LAZY_OUTPUT"}, ScanFlag},
		"dispatch hook":     {"    def __torch_dispatch__(cls, func, types, args, kwargs):\n", []string{"LAZY_OUTPUT"}, ScanFlag},
		"ctypes":            {"import ctypes\nlib = ctypes.CDLL('libcudart.so')\n", []string{"NATIVE_HOOK"}, ScanFlag},
		"in a C++ string":   {"src = '''\nauto f = dlsym(RTLD_NEXT, \"cudaEventElapsedTime\");\n'''\n", []string{"TIMER_PATCH", "NATIVE_HOOK"}, ScanReject},
		"honest kernel":     {"import torch\nfrom task import input_t, output_t\n\ndef custom_kernel(data):\n    a, b = data\n    return a + b\n", nil, ScanOK},
		"comment only":      {"# no torch.cuda.Stream() here, and no import threading\ndef custom_kernel(d):\n    return d\n", nil, ScanOK},
		"local names":       {"record = []\nsynchronize = True\nstart = time.perf_counter()\n", nil, ScanOK},
		"pointer arguments": {"args = [a.data_ptr(), b.data_ptr(), n]\nkernel(grid, block, args)\n", nil, ScanOK},
		"stdout write":      {"os.write(1, b'hello\\n')\n", nil, ScanOK},
		"compiled cache":    {"@functools.lru_cache\ndef build(dtype):\n    return load_inline(name='k', cpp_sources=src)\n", nil, ScanOK},
	} {
		fs := Scan([]byte(tc.code))
		if got := rulesOf(fs); !slices.Equal(got, tc.want) || Worst(fs) != tc.v {
			t.Errorf("%s: rules %v, verdict %q; want %v, %q (%v)", name, got, Worst(fs), tc.want, tc.v, fs)
		}
	}
	fs := Scan([]byte("import torch\n\n\nimport threading\n"))
	if len(fs) != 1 || fs[0].Line != 4 || fs[0].Text != "import threading" || !strings.Contains(fs[0].String(), "THREADS (line 4: import threading)") {
		t.Errorf("finding = %+v; want THREADS on line 4", fs)
	}
}

// TestScan_BundledSolutions: no correct solution or template of the
// bundled problems is refused (a defence that rejects correct kernels is a
// bug), and any flag they raise is listed here on purpose.
func TestScan_BundledSolutions(t *testing.T) {
	t.Parallel()
	var files []string
	for _, pat := range []string{"*/solutions/correct/*", "*/templates/*"} {
		m, err := filepath.Glob(filepath.Join("..", "problems", "library", pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found %d bundled solutions and templates; the library moved?", len(files))
	}
	flagged := map[string][]string{}
	for _, f := range files {
		code, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fs := Scan(code)
		if Worst(fs) == ScanReject {
			t.Errorf("%s is refused: %v", f, fs)
		}
		if len(fs) > 0 {
			flagged[f] = rulesOf(fs)
		}
	}
	for f, rules := range flagged {
		t.Errorf("%s is flagged %v; a correct solution should not need review", f, rules)
	}
}

// TestScan_Budget: hostile code costs the scanner a bounded amount and is
// flagged for review where it stops; honest code is read whole with most
// of the budget left; repeated findings are capped per rule (issue 18: the
// scanner cost up to 1.6 s of CPU per 1 MB upload and stored a finding per
// line).
func TestScan_Budget(t *testing.T) {
	t.Parallel()
	hostile := map[string][]byte{
		"one long line of needles": bytes.Repeat([]byte("a[id(x).data_ptr() torch.cuda. Event. "), 1<<20/38),
		"many short lines":         bytes.Repeat([]byte("x = c.get(torch.cuda.foo) + time.x + os.y\n"), 1<<20/42),
	}
	for name, code := range hostile {
		fs, left := scan(code, scanBudget)
		if left != 0 || len(fs) == 0 || fs[len(fs)-1].Rule != ScanLimit || Worst(fs) != ScanFlag {
			t.Errorf("%s: %d of the budget left, findings %v; want it spent and a %s flag last", name, left, fs, ScanLimit)
		}
	}

	files, err := filepath.Glob(filepath.Join("..", "problems", "library", "*", "solutions", "correct", "*"))
	if err != nil || len(files) < 10 {
		t.Fatalf("found %d bundled solutions (%v)", len(files), err)
	}
	for _, f := range files {
		code, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Honest code the size of the largest allowed upload still fits.
		big := bytes.Repeat(code, 1+1_000_000/max(len(code), 1))[:1_000_000]
		if _, left := scan(big, scanBudget); left < scanBudget/4 {
			t.Errorf("%s repeated to 1 MB leaves %d of %d bytes of the budget", f, left, scanBudget)
		}
	}

	fs := Scan(bytes.Repeat([]byte("import threading\n"), 10_000))
	if len(fs) != maxFindingsPerRule || fs[0].Line != 1 || fs[maxFindingsPerRule-1].Line != maxFindingsPerRule {
		t.Errorf("10,000 import lines gave %d findings (%v); want the first %d", len(fs), fs, maxFindingsPerRule)
	}

	// A line past any buffer is read, not silently dropped with the rest.
	long := append(bytes.Repeat([]byte("x"), 5<<20), []byte("\nimport ctypes\n")...)
	if got := rulesOf(Scan(long)); !slices.Equal(got, []string{"NATIVE_HOOK"}) {
		t.Errorf("after a 5 MB line: rules %v; want NATIVE_HOOK", got)
	}
}

// BenchmarkScan: 1 MB of hostile code against 1 MB of a bundled
// solution; x-honest is the ratio, bounded by the budget, not the input
// (it was about 20x before the budget: 0.8 s a megabyte).
func BenchmarkScan(b *testing.B) {
	one, err := os.ReadFile(filepath.Join("..", "problems", "library", "vectoradd", "solutions", "correct", "chunked_add.py"))
	if err != nil {
		b.Skip("bundled solution moved:", err)
	}
	honest := bytes.Repeat(one, 1_000_000/len(one))
	hostile := bytes.Repeat([]byte("a[id(x).data_ptr() torch.cuda. Event. "), 1_000_000/38)
	var tHonest, tHostile time.Duration
	for range b.N {
		start := time.Now()
		Scan(honest)
		mid := time.Now()
		Scan(hostile)
		tHonest, tHostile = tHonest+mid.Sub(start), tHostile+time.Since(mid)
	}
	b.ReportMetric(float64(tHostile)/float64(tHonest), "x-honest")
	b.ReportMetric(float64(tHostile.Milliseconds())/float64(b.N), "ms-hostile/MB")
}
