package problems

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Interpreter is a Python that imports torch.
type Interpreter struct {
	Path   string `json:"path"`
	Python string `json:"python"` // version
	Torch  string `json:"torch"`
	// Device is what problems will generate inputs on: cuda (also ROCm) or cpu.
	Device string `json:"device"`
	// Dirs are the directories the interpreter and its packages live in
	// (prefix, base prefix, the executable's real directory): what a
	// sandbox must bind for it to start.
	Dirs []string `json:"dirs,omitempty"`
	// BinDir holds the interpreter as it was named (a virtual environment's
	// bin, with its tools such as ninja, which load_inline runs).
	BinDir string `json:"bin_dir,omitempty"`
}

// ErrNoTorch says that no candidate interpreter could import torch.
var ErrNoTorch = errors.New("no Python interpreter that imports torch")

const probeScript = `import os, sys, torch
print(sys.version.split()[0], torch.__version__, "cuda" if torch.cuda.is_available() else "cpu")
dirs = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(os.path.realpath(torch.__file__))}
print("\t".join(sorted(dirs)))
print(os.path.dirname(os.path.abspath(sys.executable)))`

// PythonCandidates lists interpreters to try, in order: the explicit ones,
// then every python3 and python on PATH. The harness interpreter is thus
// configuration or discovery, never a fixed path.
func PythonCandidates(explicit ...string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if p == "" || seen[p] {
			return
		}
		seen[p] = true
		out = append(out, p)
	}
	for _, e := range explicit {
		add(e)
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		for _, name := range []string{"python3", "python"} {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				add(p)
			}
		}
	}
	return out
}

// FindPython returns the first candidate that imports torch. The error lists
// what each candidate said, so a missing install is easy to tell apart from a
// broken one.
func FindPython(ctx context.Context, candidates []string) (*Interpreter, error) {
	var tried []string
	for _, c := range candidates {
		it, err := ProbePython(ctx, c)
		if err == nil {
			return it, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", c, err))
	}
	if len(tried) == 0 {
		return nil, fmt.Errorf("find python: %w (no python3 on PATH)", ErrNoTorch)
	}
	return nil, fmt.Errorf("find python: %w; tried:\n  %s", ErrNoTorch, strings.Join(tried, "\n  "))
}

// ProbePython checks one interpreter.
func ProbePython(ctx context.Context, path string) (*Interpreter, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-c", probeScript).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg == "" {
			msg = err.Error()
		}
		return nil, errors.New(truncate(msg, 200))
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) < 3 {
		return nil, fmt.Errorf("unexpected probe output %q", truncate(string(out), 200))
	}
	lines = lines[len(lines)-3:]
	f := strings.Fields(lines[0])
	if len(f) != 3 {
		return nil, fmt.Errorf("unexpected probe output %q", truncate(string(out), 200))
	}
	return &Interpreter{Path: path, Python: f[0], Torch: f[1], Device: f[2], Dirs: strings.Split(lines[1], "\t"), BinDir: lines[2]}, nil
}
