package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/appliance/api"
	"kernelbox/internal/testutil"
)

func lib(parts ...string) string {
	return filepath.Join(append([]string{testutil.RepoRoot(), "problems", "library"}, parts...)...)
}

func TestEval_UsageErrors(t *testing.T) {
	t.Parallel()
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "task.yml"), []byte("lang: [py\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := lib("vectoradd", "solutions", "correct", "chunked_add.py")
	big := filepath.Join(t.TempDir(), "big.py")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#"), 2_000_000), 0o644); err != nil {
		t.Fatal(err)
	}
	cu := filepath.Join(t.TempDir(), "sub.cu")
	if err := os.WriteFile(cu, []byte("int main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badArchive := filepath.Join(t.TempDir(), "k.tar.gz")
	if err := os.WriteFile(badArchive, []byte{0x1f, 0x8b, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"damaged archive", []string{"eval", "--problem", "vectoradd", badArchive}, "k.tar.gz: the archive is not a gzipped tar"},
		{"no submission", []string{"eval", "--problem", "vectoradd"}, "give exactly one SUBMISSION"},
		{"missing submission", []string{"eval", "--problem", "vectoradd", "nope.py"}, "submission: stat nope.py: no such file"},
		{"unknown problem", []string{"eval", "--problem", "nosuch", sub}, `problem "nosuch": no such directory and no bundled problem`},
		{"malformed task.yml", []string{"eval", "--problem", bad, sub}, "task.yml: not valid YAML"},
		{"bad mode", []string{"eval", "--problem", "vectoradd", "--mode", "ranked", sub}, `unknown mode "ranked"`},
		{"bad seed", []string{"eval", "--problem", "vectoradd", "--seed", "x", sub}, "--seed must be a non-negative integer"},
		{"oversized", []string{"eval", "--problem", "vectoradd", big}, "more than the 1000000 allowed"},
		{"wrong extension", []string{"eval", "--problem", "vectoradd", cu}, "takes a .py file"},
		{"no problem flag", []string{"eval", sub}, `Required flag "problem" not set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, code := runCLI(t, tt.args...)
			if code != api.ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("kernelbox %v: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr, api.ExitUsage, tt.want)
			}
		})
	}
}

func TestEval_PassAndFail(t *testing.T) {
	t.Parallel()
	testutil.RequireTorch(t)
	stdout, stderr, code := runCLI(t, "eval", "--problem", "grayscale", "--json", lib("grayscale", "solutions", "correct", "channel_slices.py"))
	if code != api.ExitOK {
		t.Fatalf("eval correct: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, stdout)
	}
	for _, key := range []string{"passed", "mode", "tests", "benchmarks", "score"} {
		if _, ok := doc[key]; !ok {
			t.Errorf("--json output has no %q: %s", key, stdout)
		}
	}
	if doc["passed"] != true || doc["mode"] != "test" {
		t.Errorf("passed = %v, mode = %v", doc["passed"], doc["mode"])
	}

	stdout, _, code = runCLI(t, "eval", "--problem", lib("grayscale"), lib("grayscale", "solutions", "wrong", "channel_mean.py"))
	if code != api.ExitFailed || !strings.Contains(stdout, "✗ test 0") || !strings.Contains(stdout, "FAILED") {
		t.Errorf("eval wrong: exit %d, stdout\n%s\nwant exit %d with a failed test", code, stdout, api.ExitFailed)
	}
}

func TestEval_BrokenSubmissionsReadably(t *testing.T) {
	t.Parallel()
	testutil.RequireTorch(t)
	dir := t.TempDir()
	syntax := filepath.Join(dir, "syntax.py")
	if err := os.WriteFile(syntax, []byte("def custom_kernel(data)\n    return data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "eval", "--problem", "vectoradd", syntax)
	if code != api.ExitFailed || !strings.Contains(stdout, "SyntaxError") || strings.Contains(stderr, "panic") {
		t.Errorf("syntax error: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

func TestProblemsListAndExport(t *testing.T) {
	t.Parallel()
	stdout, _, code := runCLI(t, "problems", "list")
	if code != 0 || len(strings.Fields(stdout)) < 12 || !strings.Contains(stdout, "vectoradd") {
		t.Errorf("problems list: exit %d, %q", code, stdout)
	}
	dir := filepath.Join(t.TempDir(), "lib")
	if _, stderr, code := runCLI(t, "problems", "export", dir); code != 0 {
		t.Fatalf("problems export: exit %d %s", code, stderr)
	}
	for _, f := range []string{"kernelbox.yaml", "harness/eval.py", "vectoradd/task.yml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("export lacks %s: %v", f, err)
		}
	}
	if _, stderr, code := runCLI(t, "problems", "export", dir); code != api.ExitUsage || !strings.Contains(stderr, "not empty") {
		t.Errorf("export into a full dir: exit %d %q", code, stderr)
	}
}

func TestProblemsCheck_Invalid(t *testing.T) {
	t.Parallel()
	_, stderr, code := runCLI(t, "problems", "check", t.TempDir())
	if code != api.ExitUsage || !strings.Contains(stderr, "no task.yml") {
		t.Errorf("check empty dir: exit %d, %q", code, stderr)
	}
}

func TestEval_NativeProblemWithoutNVCC(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("nvcc"); err == nil {
		t.Skip("nvcc is on PATH; the GPU run covers lang cu (problems TestCUDAProblem_NativeHarness)")
	}
	dir := filepath.Join(testutil.RepoRoot(), "problems", "testdata", "cuda_identity")
	_, stderr, code := runCLI(t, "eval", "--problem", dir, filepath.Join(dir, "submission.cu"))
	if code != api.ExitUsage || !strings.Contains(stderr, "needs nvcc on PATH") {
		t.Errorf("exit %d, stderr %q; want %d and a message about nvcc", code, stderr, api.ExitUsage)
	}
}

// TestEval_ProfileWithNCU: `kernelbox eval --mode profile --ncu NCU
// --profile FILE` wraps the harness in ncu (the stand-in of
// problems/testdata/fakencu), prints the summary and saves the report.
func TestEval_ProfileWithNCU(t *testing.T) {
	t.Parallel()
	testutil.RequireTorch(t)
	ncu, err := filepath.Abs(filepath.Join(testutil.RepoRoot(), "problems", "testdata", "fakencu", "ncu"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "k.ncu-rep")
	stdout, stderr, code := runCLI(t, "eval", "-p", "vectoradd", "-m", "profile", "--ncu", ncu, "--profile", out,
		lib("vectoradd", "solutions", "correct", "chunked_add.py"))
	if code != api.ExitOK || !strings.Contains(stdout, "Nsight Compute, 3 kernels in the custom_kernel range") || !strings.Contains(stdout, "kernel 1: add_kernel") {
		t.Fatalf("eval --mode profile --ncu = exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.HasPrefix(string(b), "fake ncu report: --target-processes all --nvtx") {
		t.Errorf("the saved report = %q, %v", b, err)
	}
	if _, stderr, code := runCLI(t, "eval", "-p", "vectoradd", "-m", "profile", "--ncu", "/nonexistent/ncu",
		lib("vectoradd", "solutions", "correct", "chunked_add.py")); code != api.ExitUsage || !strings.Contains(stderr, "/nonexistent/ncu") {
		t.Errorf("eval with a missing ncu = exit %d: %s", code, stderr)
	}
}
