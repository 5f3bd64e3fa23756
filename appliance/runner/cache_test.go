package runner

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/sandbox"
	"kernelbox/sandbox/sandboxtest"
)

// cacheFile is one file of a test's compile cache.
type cacheFile struct {
	rel          string // slash-separated, under the cache
	size         int
	atime, mtime time.Time
}

// writeCache writes files under dir with their sizes and times.
func writeCache(t *testing.T, dir string, files ...cacheFile) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte{'k'}, f.size), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, f.atime, f.mtime); err != nil {
			t.Fatal(err)
		}
	}
}

// cacheLeft lists what is left under dir but directories: files and links.
func cacheLeft(t *testing.T, dir string) []string {
	t.Helper()
	var left []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			left = append(left, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// TestPruneCache: whole entries go, least recently used first (the later
// of access and modification time), until the cache fits its budget; a
// link is an entry of its own or part of one, removed and never followed,
// and what it points at is neither counted nor touched.
func TestPruneCache(t *testing.T) {
	t.Parallel()
	now := time.Now()
	day := 24 * time.Hour
	old := func(rel string, age time.Duration) cacheFile {
		return cacheFile{rel: rel, size: 64 << 10, atime: now.Add(-age), mtime: now.Add(-age)}
	}
	tests := []struct {
		name   string
		files  []cacheFile
		links  map[string]string // link under the cache -> target; OUT is a directory outside it
		budget int64
		want   []string
	}{
		{name: "under budget, nothing goes",
			files:  []cacheFile{old("triton/a/k.so", 3*day), old("torch_extensions/ext/ext.so", 2*day), old("cuda/index", day)},
			budget: 1 << 20, want: []string{"cuda/index", "torch_extensions/ext/ext.so", "triton/a/k.so"}},
		{name: "least recently used first",
			files: []cacheFile{
				old("triton/a/k.so", 3*day),
				old("torch_extensions/ext/ext.so", 2*day),
				// Read an hour ago, though built long ago: used.
				{rel: "triton/b/k.so", size: 64 << 10, atime: now.Add(-time.Hour), mtime: now.Add(-5 * day)},
				// Access times not kept (noatime): the modification time counts.
				{rel: "triton/c/k.so", size: 64 << 10, atime: now.Add(-5 * day), mtime: now.Add(-day)},
			},
			// Room for two entries (64 KiB of file and 4 KiB of directory each).
			budget: 150 << 10, want: []string{"triton/b/k.so", "triton/c/k.so"}},
		{name: "an entry goes whole, with its subdirectories",
			files: []cacheFile{
				old("inductor/fx/ab/graph", 4*day), old("inductor/fx/cd/graph", time.Hour),
				old("inductor/zz/code.py", 2*day),
			},
			// fx (two files and three directories) fits; with zz it does not.
			budget: 150 << 10, want: []string{"inductor/fx/ab/graph", "inductor/fx/cd/graph"}},
		{name: "the CUDA driver's cache is one entry",
			files:  []cacheFile{old("cuda/index", time.Hour), old("cuda/3/a", 4*day), old("triton/x/k.so", 2*day)},
			budget: 150 << 10, want: []string{"cuda/3/a", "cuda/index"}},
		{name: "anything else at the top is one entry",
			files:  []cacheFile{old("junk", 3*day), old("more/a/b", 2*day), old("triton/x/k.so", day)},
			budget: 100 << 10, want: []string{"triton/x/k.so"}},
		{name: "budget 0 empties it",
			files:  []cacheFile{old("triton/a/k.so", time.Minute), old("cuda/index", time.Minute), old("junk", time.Minute)},
			budget: 0},
		{name: "links are not followed when measuring",
			files:  []cacheFile{old("triton/h/k.so", day)},
			links:  map[string]string{"triton/evil": "OUT", "escape": "OUT/big", "triton/h/link": "OUT"},
			budget: 200 << 10, want: []string{"escape", "triton/evil", "triton/h/k.so", "triton/h/link"}},
		{name: "links are removed, not followed",
			files:  []cacheFile{old("triton/h/k.so", day)},
			links:  map[string]string{"triton/evil": "OUT", "escape": "OUT/big", "triton/h/link": "OUT", "inductor": "OUT"},
			budget: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			dir, out := filepath.Join(base, "cache"), filepath.Join(base, "out")
			writeCache(t, out, cacheFile{rel: "big", size: 4 << 20, atime: now, mtime: now})
			writeCache(t, dir, tt.files...)
			for link, target := range tt.links {
				p := filepath.Join(dir, filepath.FromSlash(link))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(strings.Replace(target, "OUT", out, 1), p); err != nil {
					t.Fatal(err)
				}
			}
			got, err := pruneCache(dir, tt.budget)
			if err != nil {
				t.Fatalf("pruneCache(budget %d) = %v", tt.budget, err)
			}
			if left := cacheLeft(t, dir); !cmp.Equal(left, tt.want, cmpEmpty) {
				t.Errorf("pruneCache(budget %d) left %q, want %q", tt.budget, left, tt.want)
			}
			if got.kept > tt.budget {
				t.Errorf("pruneCache(budget %d) kept %d bytes", tt.budget, got.kept)
			}
			if st, err := os.Stat(filepath.Join(out, "big")); err != nil || st.Size() != 4<<20 {
				t.Errorf("the file outside the cache: %v, %v; want it untouched", st, err)
			}
			if _, err := os.Stat(dir); err != nil {
				t.Errorf("the cache directory itself: %v; want it kept", err)
			}
		})
	}
}

// cmpEmpty makes a nil list and an empty one equal.
var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })

// TestPruneCache_Odd: a cache that is not there is nothing to prune; one
// that is a link is refused, its target untouched.
func TestPruneCache_Odd(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	if got, err := pruneCache(filepath.Join(base, "gone"), 0); err != nil || got != (pruned{}) {
		t.Errorf("pruneCache(a missing directory) = %+v, %v; want nothing done, no error", got, err)
	}
	target := filepath.Join(base, "elsewhere")
	writeCache(t, target, cacheFile{rel: "triton/a/k.so", size: 4096, atime: time.Now(), mtime: time.Now()})
	link := filepath.Join(base, "7")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := pruneCache(link, 0); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("pruneCache(a link) = %v, want an error saying it is not a directory", err)
	}
	if left := cacheLeft(t, target); len(left) != 1 {
		t.Errorf("the link's target holds %q, want it untouched", left)
	}
}

// TestEntryDepth_CoversCacheEnv: pruning knows how each cache that
// problems.CacheEnv sets up lays out its entries.
func TestEntryDepth_CoversCacheEnv(t *testing.T) {
	t.Parallel()
	want := map[string]int{"triton": 1, "torch_extensions": 1, "inductor": 1, "cuda": 0}
	for _, e := range problems.CacheEnv(nil, "/c") {
		_, val, _ := strings.Cut(e, "=")
		name := strings.TrimPrefix(val, "/c/")
		d, known := want[name]
		if !known {
			t.Errorf("CacheEnv sets %s: add its layout to entryDepth (and to this test)", e)
			continue
		}
		if entryDepth[name] != d {
			t.Errorf("entryDepth[%q] = %d, want %d", name, entryDepth[name], d)
		}
	}
}

// TestUserCaches_LastRunPrunes: a user's cache is pruned when the last of
// the user's runs lets go of it, never under another of them, and
// pruning one user's cache leaves the others' alone.
func TestUserCaches_LastRunPrunes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if d := newUserCaches(root, 0).dir(1); d != "" {
		t.Errorf("dir(1) with budget 0 = %q, want none", d)
	}
	c := newUserCaches(root, 1)
	if want := filepath.Join(root, "1"); c.dir(1) != want {
		t.Errorf("dir(1) = %q, want %q", c.dir(1), want)
	}
	entry := cacheFile{rel: "triton/a/k.so", size: 4096, atime: time.Now(), mtime: time.Now()}
	writeCache(t, c.dir(1), entry)
	writeCache(t, c.dir(2), entry)
	c.hold(1)
	c.hold(1)
	if p, err := c.release(1); err != nil || p.entries != 0 || len(cacheLeft(t, c.dir(1))) != 1 {
		t.Errorf("release(1) with another run holding it = %+v, %v; want no pruning", p, err)
	}
	if p, err := c.release(1); err != nil || p.entries != 1 || len(cacheLeft(t, c.dir(1))) != 0 {
		t.Errorf("release(1) by the last run = %+v, %v; want its one entry pruned", p, err)
	}
	if left := cacheLeft(t, c.dir(2)); len(left) != 1 {
		t.Errorf("user 2's cache holds %q after user 1's was pruned, want it untouched", left)
	}
}

// TestSandboxLauncher_Cache: a launch with a cache binds it writable at
// SandboxCacheDir and points the caches there; one without gets neither,
// and the cache directory belongs to the sandbox's uid alone.
func TestSandboxLauncher_Cache(t *testing.T) {
	t.Parallel()
	fake := &sandboxtest.Runtime{}
	l, env := NewSandboxLauncher(fake, LauncherSpec{Limits: policies.DefaultLimits()})
	cache := filepath.Join(t.TempDir(), "cache", "7")
	for _, c := range []string{cache, ""} {
		if _, err := l.Launch(t.Context(), problems.Launch{Dir: t.TempDir(), Argv: []string{"/bin/true"}, Env: env, Cache: c}); err != nil {
			t.Fatalf("Launch(cache %q) = %v", c, err)
		}
	}
	specs := fake.Specs()
	want := sandbox.Bind{Source: cache, Destination: SandboxCacheDir, Writable: true}
	if !slices.Contains(specs[0].Binds, want) {
		t.Errorf("binds with a cache = %+v, want %+v among them", specs[0].Binds, want)
	}
	for _, e := range problems.CacheEnv(nil, "/cache") {
		if !slices.Contains(specs[0].Env, e) {
			t.Errorf("env with a cache = %q, want %s in it", specs[0].Env, e)
		}
	}
	for _, b := range specs[1].Binds {
		if b.Destination == SandboxCacheDir || b.Writable {
			t.Errorf("a launch without a cache binds %+v", b)
		}
	}
	for _, e := range specs[1].Env {
		if strings.HasPrefix(e, "TRITON_CACHE_DIR=") {
			t.Errorf("a launch without a cache has %s", e)
		}
	}
	st, err := os.Lstat(cache)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("the cache directory = %v, %v; want a directory with mode 0700", st, err)
	}
	if sys := st.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && (sys.Uid != sandbox.Nobody || sys.Gid != sandbox.Nobody) {
		t.Errorf("the cache directory belongs to %d:%d, want the sandbox's %d", sys.Uid, sys.Gid, sandbox.Nobody)
	}

	// A link in the cache's place is refused, not handed over.
	link := filepath.Join(filepath.Dir(cache), "8")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Launch(t.Context(), problems.Launch{Dir: t.TempDir(), Argv: []string{"/bin/true"}, Env: env, Cache: link}); err == nil {
		t.Error("Launch(cache a link) = nil error, want it refused")
	}
}

// it deleted stays, and no link of the cache is followed or brought in.
// TestCloneAndMergeCache: a standby's run finds its submitter's cache in
// its own directory as hard links (no copy, whatever the size), and what
// it builds or rebuilds there goes back into the submitter's cache; what
func TestCloneAndMergeCache(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	user, sb := filepath.Join(root, "7"), filepath.Join(root, "standby", "cache-1")
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(user, "triton", "abc", "k.cubin"), "old kernel")
	write(filepath.Join(user, "torch_extensions", "ext", "a.so"), "old ext")
	if err := os.Symlink("/etc/passwd", filepath.Join(user, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sb, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := cloneCache(user, sb); err != nil {
		t.Fatalf("cloneCache: %v", err)
	}
	same := func(a, b string) bool {
		sa, err1 := os.Stat(a)
		sb, err2 := os.Stat(b)
		return err1 == nil && err2 == nil && os.SameFile(sa, sb)
	}
	if !same(filepath.Join(user, "triton", "abc", "k.cubin"), filepath.Join(sb, "triton", "abc", "k.cubin")) {
		t.Errorf("the standby's triton/abc/k.cubin is not the user's file")
	}
	if _, err := os.Lstat(filepath.Join(sb, "link")); err == nil {
		t.Errorf("the user's link was brought into the standby's cache")
	}
	// The run: a new kernel, a rebuilt extension, a deleted entry.
	write(filepath.Join(sb, "triton", "def", "k2.cubin"), "new kernel")
	if err := os.Remove(filepath.Join(sb, "torch_extensions", "ext", "a.so")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(sb, "torch_extensions", "ext", "a.so"), "new ext")
	if err := os.RemoveAll(filepath.Join(sb, "triton", "abc")); err != nil {
		t.Fatal(err)
	}
	if err := mergeCache(sb, user); err != nil {
		t.Fatalf("mergeCache: %v", err)
	}
	for path, want := range map[string]string{
		filepath.Join(user, "triton", "def", "k2.cubin"):       "new kernel",
		filepath.Join(user, "torch_extensions", "ext", "a.so"): "new ext",
		filepath.Join(user, "triton", "abc", "k.cubin"):        "old kernel",
	} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("after the merge %s = %q, %v; want %q", path, b, err, want)
		}
	}
	// A submitter's first run: the merge makes their cache.
	fresh := filepath.Join(root, "8")
	write(filepath.Join(sb, "triton", "ghi", "k3.cubin"), "new kernel")
	if err := mergeCache(sb, fresh); err != nil {
		t.Fatalf("mergeCache into a new cache: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(fresh, "triton", "ghi", "k3.cubin")); err != nil || string(b) != "new kernel" {
		t.Errorf("new cache: %q, %v", b, err)
	}
	// Nothing cached yet: nothing to clone.
	if err := cloneCache(filepath.Join(root, "9"), sb); err != nil {
		t.Errorf("cloneCache of a user without a cache: %v", err)
	}
}

// TestMergeCache_Links: links a run planted in either tree are never
// followed, so a merge or a clone cannot write into, or bring in, another
// user's cache. The attack: the submitter's own cache points its triton
// directory at the victim's, and the standby's run builds a kernel.
func TestMergeCache_Links(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	attacker, victim := filepath.Join(root, "7"), filepath.Join(root, "8")
	sb := filepath.Join(root, "standby", "cache-1")
	for _, d := range []string{filepath.Join(victim, "triton", "v"), filepath.Join(attacker, "torch_extensions"), sb} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(victim, "triton", "v", "k.cubin"), []byte("victim's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "8", "triton"), filepath.Join(attacker, "triton")); err != nil {
		t.Fatal(err)
	}
	// An absolute link one level down, and a file where the run has a directory.
	if err := os.Symlink(filepath.Join(victim, "triton"), filepath.Join(attacker, "torch_extensions", "ext")); err != nil {
		t.Fatal(err)
	}
	if err := cloneCache(attacker, sb); err != nil {
		t.Fatalf("cloneCache: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(sb, "triton")); err == nil {
		t.Errorf("the clone brought in the link (or the victim's directory behind it)")
	}
	for _, f := range []string{filepath.Join(sb, "triton", "v", "poison"), filepath.Join(sb, "torch_extensions", "ext", "v", "poison")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("attacker's"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(sb, "etc")); err != nil {
		t.Fatal(err)
	}
	if err := mergeCache(sb, attacker); err != nil {
		t.Fatalf("mergeCache: %v", err)
	}
	var got []string
	if err := filepath.WalkDir(victim, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got = append(got, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(victim, "triton", "v", "k.cubin")}; !slices.Equal(got, want) {
		t.Errorf("the victim's cache holds %q after the merge; want only %q", got, want)
	}
	if fi, err := os.Lstat(filepath.Join(attacker, "triton")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the attacker's own link: %v, %v; want it left as it was", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(attacker, "etc")); err == nil {
		t.Errorf("the merge brought a link into the cache")
	}
}
