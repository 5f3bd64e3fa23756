package problems

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fakeNVCC is an nvcc that counts its calls in $NVCC_CALLS and builds an
// eval.out that passes every test (or, with $NVCC_FAIL, fails as nvcc
// does, with an error at a line of the submission).
const fakeNVCC = `#!/bin/sh
echo call >> "$NVCC_CALLS"
if [ -n "$NVCC_FAIL" ]; then
  echo 'submission.cu(3): error: identifier "blockIdxx" is undefined' >&2
  echo 'submission.cu(9): error: expected a ";"' >&2
  echo '2 errors detected in the compilation of "submission.cu".' >&2
  exit 1
fi
for out; do :; done
cat > "$out" <<'BIN'
#!/bin/sh
n=$(grep -c . "$2")
{ echo "test-count: $n"; i=0; while [ $i -lt $n ]; do echo "test.$i.spec: case $i"; echo "test.$i.status: pass"; i=$((i+1)); done; echo "check: pass"; } >&3
BIN
chmod +x "$out"
`

// TestCompileCUDA_Cache: a lang cu build is kept in the submitter's
// cache under a key of its sources, flags, toolchain and GPU: the same
// code again skips nvcc, other code, another GPU or no known GPU do not,
// a failed build names its errors with their lines, and a link planted
// in the cache is not followed.
func TestCompileCUDA_Cache(t *testing.T) {
	t.Parallel()
	task, err := LoadTask(filepath.Join("testdata", "cuda_identity"))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	nvcc := filepath.Join(bin, "nvcc")
	if err := os.WriteFile(nvcc, []byte(fakeNVCC), 0o755); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(t.TempDir(), "calls")
	cache := t.TempDir()
	good, err := os.ReadFile(filepath.Join("testdata", "cuda_identity", "submission.cu"))
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := os.ReadFile(filepath.Join("testdata", "cuda_identity", "wrong.cu"))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "NVCC_CALLS=" + calls}
	run := func(code []byte, arch string, env []string) *Report {
		t.Helper()
		rep, err := Evaluate(t.Context(), ExecLauncher{}, task, EvalOptions{Mode: ModeTest, Device: "cuda", Env: env,
			WorkDir: t.TempDir(), Submission: code, Cache: cache, Arch: arch, NVCC: nvcc})
		if err != nil {
			t.Fatalf("Evaluate: %v", err)
		}
		return rep
	}
	count := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "call")
	}
	for i, c := range []struct {
		what   string
		code   []byte
		arch   string
		calls  int
		cached bool
	}{
		{"first build", good, "H200", 1, false},
		{"the same code again", good, "H200", 1, true},
		{"other code", wrong, "H200", 2, false},
		{"the first code for another GPU", good, "H100", 3, false},
		{"the first code again", good, "H200", 3, true},
		{"no GPU known", good, "", 4, false},
		{"no GPU known, again", good, "", 5, false},
	} {
		rep := run(c.code, c.arch, env)
		if !rep.Passed || rep.Phases[0].Name != "compile" {
			t.Fatalf("%d %s: passed %v (%s), phases %+v", i, c.what, rep.Passed, rep.Reason, rep.Phases)
		}
		if cached := strings.Contains(rep.Phases[0].Stdout, "compile cache"); count() != c.calls || cached != c.cached {
			t.Errorf("%d %s: nvcc called %d times in all, cached %v; want %d, %v", i, c.what, count(), cached, c.calls, c.cached)
		}
	}

	rep := run([]byte("broken"), "H200", append(env, "NVCC_FAIL=1"))
	want := `compilation failed: submission.cu(3): error: identifier "blockIdxx" is undefined; submission.cu(9): error: expected a ";"`
	if rep.Passed || rep.Reason != want {
		t.Errorf("failed build: passed %v, reason %q; want %q", rep.Passed, rep.Reason, want)
	}

	// A FIFO at every cached binary's name: read without blocking, and
	// refused (nvcc runs again).
	entries, _ := os.ReadDir(filepath.Join(cache, nvccCacheDir))
	if len(entries) == 0 {
		t.Fatal("no cached build found")
	}
	for _, e := range entries {
		fifo := filepath.Join(cache, nvccCacheDir, e.Name(), compiledBinary)
		if err := os.Remove(fifo); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := count()
	if rep := run(good, "H200", env); !rep.Passed || count() != before+1 {
		t.Errorf("a FIFO in the cache: passed %v, nvcc calls %d -> %d; want passed and nvcc run again", rep.Passed, before, count())
	}

	// A run of the submitter's own could leave a link where the builds go.
	outside := t.TempDir()
	if err := os.RemoveAll(filepath.Join(cache, nvccCacheDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(cache, nvccCacheDir)); err != nil {
		t.Fatal(err)
	}
	if rep := run(good, "H200", env); !rep.Passed || !strings.Contains(rep.Phases[0].Stderr, "not cached") {
		t.Errorf("with a link in the cache: passed %v, compile stderr %q; want passed and the build not cached", rep.Passed, rep.Phases[0].Stderr)
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("the build was written through the link, into %v", entries)
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ out, want string }{
		{"submission.cu(12): error: identifier \"x\" is undefined\n\n1 error detected in the compilation of \"submission.cu\".\n",
			`submission.cu(12): error: identifier "x" is undefined`},
		{"/work/main.cpp:5:10: fatal error: foo.h: No such file or directory\ncompilation terminated.\n",
			"/work/main.cpp:5:10: fatal error: foo.h: No such file or directory"},
		{"ptxas fatal   : Unresolved extern function 'f'\n", "ptxas fatal   : Unresolved extern function 'f'"},
		{"eval.o: in function `main':\neval.cu:(.text+0x1): undefined reference to `solve'\ncollect2: error: ld returned 1 exit status\n",
			"eval.cu:(.text+0x1): undefined reference to `solve'; collect2: error: ld returned 1 exit status"},
		{"something else went wrong\nat the end\n", "at the end"},
	} {
		if got := compileErrors(c.out); got != c.want {
			t.Errorf("compileErrors(%q) = %q, want %q", c.out, got, c.want)
		}
	}
}

// TestFirstLine_BuildErrors: a load_inline build that fails is reported
// by its compiler errors, not by ninja's last words.
func TestFirstLine_BuildErrors(t *testing.T) {
	t.Parallel()
	tb := "Traceback (most recent call last):\n  File \"/work/worker.py\", line 30, in load_kernel\n" +
		"RuntimeError: Error building extension 'vecadd': [1/2] nvcc ... -c /cache/torch_extensions/vecadd/cuda.cu -o cuda.cuda.o\n" +
		"FAILED: cuda.cuda.o\n/cache/torch_extensions/vecadd/cuda.cu(7): error: identifier \"n\" is undefined\n\n" +
		"1 error detected in the compilation of \"/cache/torch_extensions/vecadd/cuda.cu\".\nninja: build stopped: subcommand failed.\n"
	want := `Error building extension 'vecadd': /cache/torch_extensions/vecadd/cuda.cu(7): error: identifier "n" is undefined`
	if got := firstLine(tb); got != want {
		t.Errorf("firstLine = %q, want %q", got, want)
	}
}
