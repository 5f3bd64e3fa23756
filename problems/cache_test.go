package problems

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCacheEnv(t *testing.T) {
	t.Parallel()
	all := func(root string) []string {
		return []string{"TRITON_CACHE_DIR=" + root + "/triton", "TORCH_EXTENSIONS_DIR=" + root + "/torch_extensions",
			"TORCHINDUCTOR_CACHE_DIR=" + root + "/inductor", "CUDA_CACHE_PATH=" + root + "/cuda"}
	}
	tests := []struct {
		name string
		env  []string
		root string
		want []string
	}{
		{"no root: env as it is", []string{"HOME=/work", "TRITON_CACHE_DIR=/work/t"}, "", []string{"HOME=/work", "TRITON_CACHE_DIR=/work/t"}},
		{"a root", []string{"HOME=/work"}, "/cache", append([]string{"HOME=/work"}, all("/cache")...)},
		{"earlier settings replaced", []string{"TRITON_CACHE_DIR=/tmp/x", "PATH=/bin", "CUDA_CACHE_PATH=/tmp/y"}, "/var/lib/kernelbox/cache/7",
			append([]string{"PATH=/bin"}, all("/var/lib/kernelbox/cache/7")...)},
		{"a lookalike name kept", []string{"TRITON_CACHE_DIRS=/x"}, "/c", append([]string{"TRITON_CACHE_DIRS=/x"}, all("/c")...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := append([]string(nil), tt.env...)
			got := CacheEnv(in, tt.root)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CacheEnv(%q, %q) mismatch (-want +got):\n%s", tt.env, tt.root, diff)
			}
			if diff := cmp.Diff(tt.env, in); diff != "" {
				t.Errorf("CacheEnv changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

// TestExecLauncher_Cache: the exec launcher makes the cache directory
// (0700, this user's) and points the caches into it.
func TestExecLauncher_Cache(t *testing.T) {
	t.Parallel()
	cache := filepath.Join(t.TempDir(), "cache", "7")
	out, err := ExecLauncher{}.Launch(t.Context(), Launch{Dir: t.TempDir(), Cache: cache, Env: []string{"TRITON_CACHE_DIR=/elsewhere"},
		Argv: []string{"/bin/sh", "-c", `mkdir -p "$TRITON_CACHE_DIR/k" && echo built > "$TRITON_CACHE_DIR/k/f" && echo "$TORCH_EXTENSIONS_DIR"`}})
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("Launch() = %+v, %v", out, err)
	}
	if got, want := strings.TrimSpace(string(out.Stdout)), filepath.Join(cache, "torch_extensions"); got != want {
		t.Errorf("TORCH_EXTENSIONS_DIR in the process = %q, want %q", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "triton", "k", "f")); err != nil || string(b) != "built\n" {
		t.Errorf("the cache entry on the host = %q, %v; want the file the process wrote", b, err)
	}
	if st, err := os.Stat(cache); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("cache directory = %v, %v; want mode 0700", st.Mode(), err)
	}
}

// cacheSpy records each launch's cache and runs it on the host.
type cacheSpy struct{ caches []string }

func (s *cacheSpy) Launch(ctx context.Context, l Launch) (Outcome, error) {
	s.caches = append(s.caches, l.Cache)
	return ExecLauncher{}.Launch(ctx, l)
}

// TestEvaluate_Cache: every launch of an evaluation gets its cache, and
// what one evaluation leaves there the next one with the same cache finds
// (and one with another cache does not).
func TestEvaluate_Cache(t *testing.T) {
	t.Parallel()
	spy := &cacheSpy{}
	cache := t.TempDir()
	_, err := Evaluate(t.Context(), spy, scriptProblem(t, passingScript, ""), EvalOptions{
		Mode: ModeLeaderboard, Python: "/bin/sh", Device: "cpu", Env: []string{"PATH=" + os.Getenv("PATH")},
		WorkDir: t.TempDir(), Submission: []byte("def custom_kernel(d): return d\n"), Cache: cache,
	})
	if err != nil {
		t.Fatalf("Evaluate() = %v", err)
	}
	if want := []string{cache, cache, cache}; !cmp.Equal(spy.caches, want) {
		t.Errorf("launches' caches = %q, want %q (one per phase)", spy.caches, want)
	}

	// Passes only where an earlier run left its entry.
	task := scriptProblem(t, `#!/bin/sh
if [ ! -f "$TRITON_CACHE_DIR/k/built" ]; then
  mkdir -p "$TRITON_CACHE_DIR/k" && touch "$TRITON_CACHE_DIR/k/built"
  echo "no cache entry yet" >&2; exit 1
fi
echo "test-count: 1" >&3; echo "test.0.spec: $(cat $2)" >&3; echo "test.0.status: pass" >&3; echo "check: pass" >&3
`, "")
	mine, theirs := t.TempDir(), t.TempDir()
	for i, tt := range []struct {
		cache  string
		passed bool
	}{{mine, false}, {mine, true}, {theirs, false}} {
		rep, err := Evaluate(t.Context(), ExecLauncher{}, task, EvalOptions{Mode: ModeTest, Python: "/bin/sh", Device: "cpu",
			Env: []string{"PATH=" + os.Getenv("PATH")}, WorkDir: t.TempDir(), Submission: []byte("\n"), Cache: tt.cache})
		if err != nil {
			t.Fatalf("run %d: Evaluate() = %v", i, err)
		}
		if rep.Passed != tt.passed {
			t.Errorf("run %d: passed %v (%s), want %v", i, rep.Passed, rep.Reason, tt.passed)
		}
	}
}
