package appliance

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/sandbox"
)

// TestRunner_CompileCache: a run gets its submitter's cache, a secret-seed
// run none.
func TestRunner_CompileCache(t *testing.T) {
	t.Parallel()
	b := newRunnerBundle(t)
	sub, err := b.svc.Submit(t.Context(), b.user, api.SubmitRequest{Leaderboard: "quick", GPU: "cpu", Mode: "leaderboard",
		Code: []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	waitFor(t, 20*time.Second, func() bool {
		got, err := b.st.Submission(t.Context(), sub.ID)
		return err == nil && api.Ended(got.Status)
	})
	want := sandbox.Bind{Source: filepath.Join(filepath.Join(b.dir, "cache"), strconv.FormatInt(b.user.ID, 10)), Destination: runner.SandboxCacheDir, Writable: true}
	var public, secret int
	for _, s := range b.fake.Specs() {
		hasBind := slices.Contains(s.Binds, want)
		hasEnv := slices.Contains(s.Env, "TRITON_CACHE_DIR=/cache/triton")
		if slices.ContainsFunc(s.Env, func(e string) bool { return strings.HasPrefix(e, "POPCORN_SEED=") }) {
			secret++
			if hasBind || hasEnv {
				t.Errorf("a secret-seed run got the compile cache: %+v", s)
			}
			continue
		}
		public++
		if !hasBind || !hasEnv {
			t.Errorf("a public run's binds %+v, env %q; want %+v and the caches in it", s.Binds, s.Env, want)
		}
	}
	if public == 0 || secret == 0 {
		t.Errorf("%d public and %d secret launches, want some of each", public, secret)
	}
}

// cacheMarker is a submission of the quick problem that passes only where
// an earlier run of its user left an entry in the Triton cache, and leaves
// one for the next.
const cacheMarker = `import os

assert os.environ["TRITON_CACHE_DIR"] == "/cache/triton", os.environ.get("TRITON_CACHE_DIR")
_entry = os.path.join(os.environ["TRITON_CACHE_DIR"], "kernelbox-e2e")
_seen = os.path.exists(os.path.join(_entry, "built"))
os.makedirs(_entry, exist_ok=True)
with open(os.path.join(_entry, "built"), "w") as f:
    f.write("built\n")


def custom_kernel(xs):
    if not _seen:
        raise RuntimeError("no cache entry yet")
    return [2 * x for x in xs]
`

// TestDaemon_CompileCache: the real daemon, sandbox and CPU backend. A
// user's second run finds what the first left in the compile cache;
// another user's run does not; and after a run the cache is pruned to its
// budget, the stale entry going and the fresh one staying.
func TestDaemon_CompileCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	td := startDaemon(t, dir, func(c *Config) { c.CacheBudget = 1 << 20 })
	td.loadQuick()
	ctx := t.Context()
	alice, _ := td.user("alice")
	bob, _ := td.user("bob")
	aliceUser, err := td.d.store.User(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache", strconv.FormatInt(aliceUser.ID, 10))
	// A stale entry over the budget, which her first run's pruning removes.
	long := time.Now().Add(-30 * 24 * time.Hour)
	stale := filepath.Join(cache, "inductor", "stale", "blob")
	if err := os.MkdirAll(filepath.Dir(stale), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(stale, long, long); err != nil {
		t.Fatal(err)
	}

	submit := func(c *api.Client) *api.SubmissionView {
		t.Helper()
		sub, err := c.Submit(ctx, api.SubmitRequest{Leaderboard: "quick", GPU: "cpu", Mode: "test", Code: []byte(cacheMarker)})
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
		v, err := td.admin.Wait(ctx, sub.ID, nil)
		if err != nil {
			t.Fatalf("Wait(%d): %v", sub.ID, err)
		}
		// Pruning follows the stored result: wait for the slots to be free.
		waitFor(t, 10*time.Second, func() bool {
			st, err := td.admin.GPUs(ctx)
			return err == nil && !slices.ContainsFunc(st.Slots, func(s api.SlotState) bool { return s.State != "idle" })
		})
		return v
	}
	for i, tt := range []struct {
		who    string
		c      *api.Client
		passed bool
	}{{"alice", alice, false}, {"alice", alice, true}, {"bob", bob, false}} {
		v := submit(tt.c)
		if v.Passed != tt.passed || (!tt.passed && !strings.Contains(v.Reason, "no cache entry yet")) {
			t.Errorf("run %d (%s): passed %v (%s); want %v, failing only for want of the cache", i, tt.who, v.Passed, v.Reason, tt.passed)
		}
	}
	var left []string
	err = filepath.WalkDir(cache, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(cache, p)
			left = append(left, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []string{"triton/kernelbox-e2e/built"}) {
		t.Errorf("alice's cache holds %q; want her entry, the stale one pruned", left)
	}
	st, err := os.Stat(cache)
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); st.Mode().Perm() != 0o700 || sys.Uid != sandbox.Nobody {
		t.Errorf("alice's cache directory: mode %v, owner %d; want 0700 and the sandbox's uid %d", st.Mode().Perm(), sys.Uid, sandbox.Nobody)
	}
}
