package problems

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// A lang cu problem is built by nvcc once per run, in the run's sandbox,
// before its gate (a warm start compiles while the GPU is another run's).
// With a submitter's compile cache (EvalOptions.Cache) and the GPU's
// architecture known (EvalOptions.Arch), the binary is kept there under a
// key of everything that makes it: the sources, nvcc's arguments, the
// toolchain (nvcc's path, size and time) and the architecture. A
// resubmission of the same code skips nvcc. The cache is the submitter's
// own: what a run of theirs could plant there reaches only their runs,
// which run their native code anyway.

// nvccCacheDir is the cache's top directory for nvcc's builds (an entry
// per key, pruned like the other tools' entries).
const nvccCacheDir = "nvcc"

// compiledBinary is what nvcc makes and the harness phases run.
const compiledBinary = "eval.out"

// compileCUDA builds a lang cu problem with nvcc into eval.out and removes
// the sources, so the running submission cannot read the reference.
func compileCUDA(ctx context.Context, l Launcher, t *Task, opts EvalOptions) (Phase, error) {
	nvcc := opts.NVCC
	if nvcc == "" {
		nvcc = "nvcc"
	}
	argv := []string{nvcc, "-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", "--extended-lambda", "-lineinfo", "-arch=native"}
	for _, d := range t.Config.IncludeDirs {
		argv = append(argv, "-I"+d)
	}
	for _, k := range slices.Sorted(maps.Keys(t.Config.Defines)) { // in one order: the cache key
		argv = append(argv, "-D"+k+"="+t.Config.Defines[k])
	}
	argv = append(argv, t.Config.CompileFlags...)
	argv = append(argv, t.Config.Sources...)
	argv = append(argv, "-o", compiledBinary)
	key := buildKey(t, opts, argv)
	if key != "" && fromCache(opts, key) {
		removeSources(t, opts)
		return Phase{Name: "compile", Passed: true, Stdout: "eval.out from the compile cache: the same sources, flags, toolchain and GPU built it before\n"}, nil
	}
	out, err := l.Launch(ctx, Launch{Dir: opts.WorkDir, Argv: argv, Env: opts.Env, Timeout: 120 * time.Second,
		OutputLimit: opts.OutputLimit, Keep: []string{compiledBinary}, Cache: opts.Cache})
	ph := Phase{Name: "compile", ExitCode: out.ExitCode, TimedOut: out.TimedOut, OOM: out.OOM, Wall: out.Wall,
		Stdout: string(out.Stdout), Stderr: string(out.Stderr), Truncated: out.Truncated}
	if err != nil {
		if ctx.Err() != nil {
			return ph, fmt.Errorf("compile %s: %w", t.Name, err)
		}
		ph.Reason = fmt.Sprintf("cannot run %s: %v", nvcc, err)
		return ph, nil
	}
	switch {
	case out.OOM:
		ph.Reason = "compilation " + describeOOM(out)
	case out.TimedOut:
		ph.Reason = "compilation timed out"
	case out.ExitCode != 0:
		ph.Reason = "compilation failed: " + compileErrors(string(out.Stderr)+"\n"+string(out.Stdout))
	default:
		ph.Passed = true
		if key != "" {
			if err := toCache(opts, key); err != nil {
				ph.Stderr += fmt.Sprintf("\nkernelbox: the build was not cached: %v\n", err)
			}
		}
		removeSources(t, opts)
	}
	return ph, nil
}

func removeSources(t *Task, opts EvalOptions) {
	for _, f := range t.Files {
		_ = os.Remove(filepath.Join(opts.WorkDir, filepath.FromSlash(f.Name)))
	}
}

// buildKey is the cache key of a build: a hash of the task's
// materialised files, nvcc's arguments, the toolchain and the GPU's
// architecture; "" when the build cannot be cached (no cache, no
// architecture, no nvcc found, a file unreadable).
func buildKey(t *Task, opts EvalOptions, argv []string) string {
	if opts.Cache == "" || opts.Arch == "" {
		return ""
	}
	tool := toolchain(argv[0], opts.Env)
	if tool == "" {
		return ""
	}
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s\n", len(s), s) }
	field("kernelbox nvcc build 1")
	field(tool)
	field(opts.Arch)
	for _, a := range argv {
		field(a)
	}
	for _, f := range t.Files {
		b, err := os.ReadFile(filepath.Join(opts.WorkDir, filepath.FromSlash(f.Name)))
		if err != nil {
			return ""
		}
		field(f.Name)
		field(string(b))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// toolchain names the nvcc that PATH in env finds (the sandbox binds the
// host's toolkit where it lies): its path, size and modification time,
// which change with any install or upgrade. "" when there is none.
func toolchain(nvcc string, env []string) string {
	paths := []string{nvcc}
	if !strings.ContainsRune(nvcc, '/') {
		paths = nil
		for _, e := range env {
			if dirs, ok := strings.CutPrefix(e, "PATH="); ok {
				for _, d := range filepath.SplitList(dirs) {
					if filepath.IsAbs(d) {
						paths = append(paths, filepath.Join(d, nvcc))
					}
				}
			}
		}
	}
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		st, err := os.Stat(real)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		return fmt.Sprintf("%s %d %d", real, st.Size(), st.ModTime().UnixNano())
	}
	return ""
}

// fromCache copies key's binary from the cache into the work directory;
// false when there is none (or it is not a plain file).
func fromCache(opts EvalOptions, key string) bool {
	root, err := os.OpenRoot(opts.Cache)
	if err != nil {
		return false
	}
	defer root.Close()
	rel := filepath.Join(nvccCacheDir, key, compiledBinary)
	// No link followed, no FIFO waited on: the descriptor is checked.
	src, err := root.OpenFile(rel, os.O_RDONLY|noFollowNonBlock, 0)
	if err != nil {
		return false
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	now := time.Now()
	_ = root.Chtimes(rel, now, st.ModTime()) // used: the pruning's clock
	if err := copyFile(filepath.Join(opts.WorkDir, compiledBinary), src); err != nil {
		_ = os.Remove(filepath.Join(opts.WorkDir, compiledBinary))
		return false
	}
	return true
}

// toCache keeps the work directory's binary under key. It writes through
// an os.Root over the cache, which the submitter's runs can write: a link
// they leave there is not followed out of it.
func toCache(opts EvalOptions, key string) error {
	src, err := os.Open(filepath.Join(opts.WorkDir, compiledBinary))
	if err != nil {
		return err
	}
	defer src.Close()
	root, err := os.OpenRoot(opts.Cache)
	if err != nil {
		return err
	}
	defer root.Close()
	dir := filepath.Join(nvccCacheDir, key)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// A new file of a name nobody knows: what a run may have left at a
	// fixed name (a FIFO would block this open for good) is never opened.
	tmp := filepath.Join(dir, fmt.Sprintf("%s.%d.tmp", compiledBinary, rand.Int64()))
	dst, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, filepath.Join(dir, compiledBinary))
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

func copyFile(dst string, src io.Reader) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// diagnosticRE matches a compiler's error lines with their place: nvcc's
// "file.cu(12): error: ...", gcc's and clang's "file.cpp:12:3: error:
// ...", ptxas's and the linker's errors.
var diagnosticRE = regexp.MustCompile(`(?m)^.*(\(\d+\): (catastrophic )?error|:\d+(:\d+)?: (fatal )?error|ptxas.*(error|fatal)|undefined reference to|ld returned).*$`)

// compileErrors is what a failed build says went wrong, for a reason: its
// first error lines, with file and line, or else its last line.
func compileErrors(output string) string {
	var lines []string
	for _, m := range diagnosticRE.FindAllString(output, -1) {
		m = strings.TrimSpace(m)
		if !slices.Contains(lines, m) {
			lines = append(lines, truncate(m, 300))
		}
		if len(lines) == 3 {
			break
		}
	}
	if len(lines) == 0 {
		return lastLine(output)
	}
	return strings.Join(lines, "; ")
}
