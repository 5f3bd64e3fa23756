package runner

// Per-user compile caches: each submitter's runs keep what Triton,
// load_inline, inductor and the CUDA driver build in DATA/cache/<user id>
// (problems.CacheEnv points the tools there; the sandbox launcher binds it
// at SandboxCacheDir), and after the runs each cache is pruned to its
// budget, least recently used entries first.
//
// Security: a run writes only its own user's cache, and only that user's
// later runs read it, so what a submission leaves there (any file, a
// poisoned build, a link) reaches no one else; the pruning never follows
// a link out of it. A secret-seed run gets no cache at all (runner.cacheFor).
// The judge (problems/library/harness/judge.py) uses no compile cache: it
// and the bundled references build nothing (no Triton, load_inline or
// inductor) and torch's kernels are prebuilt. The one cache it could read
// is the CUDA driver's, for PTX that torch ships no SASS for on the GPU at
// hand, and an uploaded reference that JIT-compiles would read the others;
// the worker, the same uid in the same container, could poison those in
// the run's HOME before this cache existed (docs/integrity.md).

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"kernelbox/appliance/store"
	"kernelbox/policies"
)

// userCaches hands each run its submitter's compile cache and prunes a
// cache once no run of its user is using it: MaxRunningPerUser lets one
// user run on several GPUs at once, and deleting an entry under a run
// that is loading it would fail that run.
type userCaches struct {
	root   string // a user's cache is root/<user id>
	budget int64  // bytes per user; 0 turns the caches off
	mu     sync.Mutex
	users  map[int64]*sync.RWMutex // runs hold it shared, pruning exclusively
}

func newUserCaches(root string, budget int64) *userCaches {
	return &userCaches{root: root, budget: budget, users: map[int64]*sync.RWMutex{}}
}

// dir is user's cache directory, "" when the caches are off.
func (c *userCaches) dir(user int64) string {
	if c == nil || c.budget <= 0 {
		return ""
	}
	return filepath.Join(c.root, strconv.FormatInt(user, 10))
}

func (c *userCaches) lock(user int64) *sync.RWMutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.users[user]
	if !ok {
		l = &sync.RWMutex{}
		c.users[user] = l
	}
	return l
}

// hold marks a run of user as using the cache, waiting while it is being
// pruned; release must follow.
func (c *userCaches) hold(user int64) { c.lock(user).RLock() }

// release ends a run's use of user's cache. The last run out prunes it
// to the budget; when another run still holds it, that run's release does.
func (c *userCaches) release(user int64) (pruned, error) {
	l := c.lock(user)
	l.RUnlock()
	// TryLock, never Lock: a waiting writer would stall the user's next
	// run, and there is nothing to wait for, the last holder prunes.
	if !l.TryLock() {
		return pruned{}, nil
	}
	defer l.Unlock()
	return pruneCache(c.dir(user), c.budget)
}

// cacheFor is the compile cache directory a run gets, "" for none: its
// submitter's. A secret-seed run gets none: what it could write there (the
// inputs drawn from the secret seed) would be read by the submitter's next
// public run, whose output the submitter sees.
func (r *Runner) cacheFor(rc *store.RunContext) string {
	if rc.Run.Secret || rc.Submission == nil {
		return ""
	}
	return r.caches.dir(rc.Submission.UserID())
}

// HoldCache marks the run's compile cache in use until done is called,
// once the run is over (outside its timed part, its result stored); done
// then prunes the cache to its budget if no other run of the user holds
// it.
func (r *Runner) HoldCache(log *slog.Logger, rc *store.RunContext) (done func()) {
	dir := r.cacheFor(rc)
	if dir == "" {
		return func() {}
	}
	user := rc.Submission.UserID()
	r.caches.hold(user)
	return func() {
		p, err := r.caches.release(user)
		if err != nil {
			log.Warn("prune the compile cache", logUser, rc.Submission.User, "dir", dir, "err", err)
		}
		if p.entries > 0 {
			log.Info("pruned the compile cache", logUser, rc.Submission.User, "dir", dir, "entries", p.entries,
				"freed", policies.ByteSize(p.freed).String(), "kept", policies.ByteSize(p.kept).String())
		}
	}
}

// pruned says what pruning a cache did.
type pruned struct {
	entries int   // entries removed
	freed   int64 // bytes they took
	kept    int64 // bytes left
}

// entryDepth is how far below a cache's top directory (problems.CacheEnv
// names them) a whole entry lies, which pruning deletes or keeps as one:
// Triton keeps a directory per compiled kernel (triton/<hash>),
// load_inline one per extension (torch_extensions/<name>), inductor a
// directory per hash prefix or kind of artefact, and a lang cu problem's
// build one per key (nvcc/<key>, problems/nvcc.go). The CUDA driver's cache
// is not here: it is one database (an index over its files, which the
// driver bounds itself), so it is pruned whole, like anything else a run
// left at the top.
var entryDepth = map[string]int{"triton": 1, "torch_extensions": 1, "inductor": 1, "nvcc": 1}

// cacheEntry is one entry of a cache.
type cacheEntry struct {
	rel  string // slash-separated, under the cache directory
	size int64  // bytes on disk, its directories' included
	// used is the latest access or modification of any file in it (not
	// its directories, whose times move when a tool only looks): a build
	// that is loaded again is read, so its access time moves. With relatime
	// (the usual mount option) an access time moves only once a day or so,
	// which is fine enough for whole builds; where access times are off
	// (noatime) it is the modification time. An entry without files is
	// the least recently used of all.
	used time.Time
}

// pruneCache deletes whole entries of the cache in dir, least recently
// used first, until it takes at most budget bytes. It reads and deletes
// through an os.Root: a link a run left there is an entry like any other
// (removed, not followed), and no path it resolves leaves dir. A dir that
// does not exist (no run used it yet, or an operator removed it) is
// nothing to prune.
func pruneCache(dir string, budget int64) (pruned, error) {
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return pruned{}, nil
	}
	if err != nil {
		return pruned{}, fmt.Errorf("prune cache: %w", err)
	}
	if !st.IsDir() {
		return pruned{}, fmt.Errorf("prune cache %s: not a directory (%s)", dir, st.Mode().Type())
	}
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return pruned{}, nil
	}
	if err != nil {
		return pruned{}, fmt.Errorf("prune cache: %w", err)
	}
	defer root.Close()
	entries, err := cacheEntries(root)
	if err != nil {
		return pruned{}, fmt.Errorf("prune cache %s: %w", dir, err)
	}
	var res pruned
	for _, e := range entries {
		res.kept += e.size
	}
	slices.SortFunc(entries, func(a, b cacheEntry) int {
		if c := a.used.Compare(b.used); c != 0 {
			return c
		}
		return strings.Compare(a.rel, b.rel)
	})
	var errs []error
	for _, e := range entries {
		if res.kept <= budget {
			break
		}
		if err := root.RemoveAll(filepath.FromSlash(e.rel)); err != nil {
			errs = append(errs, err)
			continue
		}
		res.entries++
		res.freed += e.size
		res.kept -= e.size
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("prune cache %s: %w", dir, err)
	}
	return res, nil
}

// cacheEntries lists and measures the entries under root (entryDepth).
// What vanishes while it looks is skipped.
func cacheEntries(root *os.Root) ([]cacheEntry, error) {
	fsys := root.FS()
	top, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var rels []string
	for _, d := range top {
		// d.IsDir is the directory entry's own type: false for a link.
		if entryDepth[d.Name()] == 0 || !d.IsDir() {
			rels = append(rels, d.Name())
			continue
		}
		subs, err := fs.ReadDir(fsys, d.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, s := range subs {
			rels = append(rels, path.Join(d.Name(), s.Name()))
		}
	}
	var entries []cacheEntry
	for _, rel := range rels {
		e, err := measureEntry(root, rel)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// measureEntry adds up one entry's files without following links: the
// entry itself is looked at with Lstat, and a walk descends only into
// real directories.
func measureEntry(root *os.Root, rel string) (cacheEntry, error) {
	e := cacheEntry{rel: rel}
	add := func(info fs.FileInfo) {
		sys, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			e.size += info.Size()
			if !info.IsDir() {
				e.used = later(e.used, info.ModTime())
			}
			return
		}
		e.size += sys.Blocks * 512 // st_blocks counts 512-byte units, whatever the block size
		if !info.IsDir() {
			e.used = later(e.used, time.Unix(sys.Atim.Unix()), time.Unix(sys.Mtim.Unix()))
		}
	}
	info, err := root.Lstat(filepath.FromSlash(rel))
	if err != nil {
		return e, err
	}
	if !info.IsDir() {
		add(info)
		return e, nil
	}
	err = fs.WalkDir(root.FS(), rel, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		add(info)
		return nil
	})
	return e, err
}

func later(t time.Time, more ...time.Time) time.Time {
	for _, m := range more {
		if m.After(t) {
			t = m
		}
	}
	return t
}

// cloneCache makes dst (a standby's empty cache directory) a copy of the
// cache src made of hard links: the run that takes the standby over
// finds its submitter's builds at once, whatever their size. Both lie
// under one caches root. Only directories and regular files are brought
// in, with their owners (the sandbox's uid), never a link.
func cloneCache(src, dst string) error {
	return linkTree(src, dst, false)
}

// mergeCache brings what a standby's run built (src, its cache directory,
// cloned from dst at the gate) back into the submitter's cache dst: each
// file that is not already there as the same file replaces dst's (a
// rename, so a run reading the old one keeps it). What the run deleted
// stays in dst; pruning bounds it.
func mergeCache(src, dst string) error {
	return linkTree(src, dst, true)
}

// linkTree mirrors the directories and regular files of src into dst
// (one filesystem): by hard link, or by rename when move is set. Both
// are the sandbox's to write (a run's cache directory is bound into its
// container), so any name in them may be a link planted by a run, one
// that leads into another user's cache: every step is taken relative to
// a directory opened with O_NOFOLLOW, by name, through the *at calls,
// and nothing in either tree is ever followed. Where dst has a link or
// a file where src has a directory, dst's stays and that subtree is not
// brought in.
func linkTree(src, dst string, move bool) error {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil // nothing cached yet
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer unix.Close(sfd)
	var top unix.Stat_t
	if err := unix.Fstat(sfd, &top); err != nil {
		return fmt.Errorf("stat %s: %w", src, err)
	}
	// The submitter's first run: their cache is made like the standby's.
	parent, name := filepath.Split(filepath.Clean(dst))
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", parent, err)
	}
	dfd, err := mkdirAt(pfd, name, &top)
	unix.Close(pfd)
	if err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	defer unix.Close(dfd)
	if err := mirrorDir(sfd, dfd, move, 0); err != nil {
		return fmt.Errorf("%s into %s: %w", src, dst, err)
	}
	return nil
}

// maxCacheDepth bounds how deep linkTree goes (an open directory per
// level): no tool's cache nests near it, a run's planted tree may.
const maxCacheDepth = 32

// mirrorDir brings the entries of the directory sfd into the directory
// dfd (linkTree).
func mirrorDir(sfd, dfd int, move bool, depth int) error {
	if depth > maxCacheDepth {
		return fmt.Errorf("nested deeper than %d directories", maxCacheDepth)
	}
	names, err := dirNames(sfd)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			errs = append(errs, mirrorSub(sfd, dfd, name, &st, move, depth))
		case unix.S_IFREG:
			errs = append(errs, placeFile(sfd, dfd, name, &st, move))
		}
	}
	return errors.Join(errs...)
}

// mirrorSub mirrors the subdirectory name of sfd into dfd's, made like it
// when missing; a link or a file in dfd under that name is left alone.
func mirrorSub(sfd, dfd int, name string, st *unix.Stat_t, move bool, depth int) error {
	child, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer unix.Close(child)
	to, err := mkdirAt(dfd, name, st)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil // not a directory on dst's side: theirs wins, and no link is followed
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer unix.Close(to)
	if err := mirrorDir(child, to, move, depth+1); err != nil {
		return fmt.Errorf("%s/%w", name, err)
	}
	return nil
}

// placeFile links (or moves) the regular file name of sfd into dfd. A
// move replaces what dfd has there (a rename, so a run reading the old
// file keeps it; a link there is replaced, not followed) unless it is the
// same file or a directory.
func placeFile(sfd, dfd int, name string, st *unix.Stat_t, move bool) error {
	if !move {
		err := unix.Linkat(sfd, name, dfd, name, 0)
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
		return err
	}
	var there unix.Stat_t
	err := unix.Fstatat(dfd, name, &there, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && ((there.Dev == st.Dev && there.Ino == st.Ino) || there.Mode&unix.S_IFMT == unix.S_IFDIR) {
		return nil
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := unix.Renameat(sfd, name, dfd, name); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// mkdirAt opens the directory name of dfd, made with like's permissions
// and (as root) owner when it is missing: the sandbox's uid must be able
// to write in what it wrote in before. A link there is not followed
// (ELOOP), nor a file taken for a directory (ENOTDIR).
func mkdirAt(dfd int, name string, like *unix.Stat_t) (int, error) {
	err := unix.Mkdirat(dfd, name, like.Mode&0o777)
	made := err == nil
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if made && os.Geteuid() == 0 {
		if err := unix.Fchown(fd, int(like.Uid), int(like.Gid)); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// dirNames lists the directory fd (left open, its offset rewound).
func dirNames(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}
