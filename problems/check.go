package problems

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// FixtureResult is the outcome of one fixture of a problem check.
type FixtureResult struct {
	Path     string  `json:"path"`
	Want     string  `json:"want"` // pass or fail
	Mode     Mode    `json:"mode"`
	Skipped  string  `json:"skipped,omitempty"` // why it did not run
	Report   *Report `json:"report,omitempty"`
	OK       bool    `json:"ok"`                 // the outcome was the wanted one
	Problems string  `json:"problems,omitempty"` // what went against the wish
}

// CheckOptions configure CheckProblem.
type CheckOptions struct {
	Python  *Interpreter
	Env     []string
	Scratch string // a directory for work directories; the caller removes it
	// RankCorrect also runs the first correct fixture in leaderboard mode, so
	// the benchmarks and the score are exercised, not only the tests.
	RankCorrect bool
	// Templates also runs every template in test mode: the bundled library
	// ships templates that are naive but correct, so each must pass.
	Templates bool
}

var requiresRE = regexp.MustCompile(`^\s*(?:#|//)\s*kernelbox:\s*requires\s+([A-Za-z0-9_]+)\s*$`)

// gpuOnlyRE finds what only runs on a GPU in a fixture that does not say
// so: KernelBot's fixtures carry no requires line, and a Triton kernel or
// a load_inline extension run on the CPU backend fails for that alone.
var gpuOnlyRE = regexp.MustCompile(`(?m)^\s*(?:import triton|from triton\b)|\bload_inline\s*\(`)

// FixtureRequires reads a fixture's "# kernelbox: requires cuda" line, for
// fixtures that only run on a GPU (Triton, CUDA), and otherwise says cuda
// for a Python fixture that imports triton or builds a load_inline
// extension. It returns "" for none.
func FixtureRequires(src []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(src))
	for n := 0; sc.Scan() && n < 20; n++ {
		if m := requiresRE.FindStringSubmatch(sc.Text()); m != nil {
			return m[1]
		}
	}
	if gpuOnlyRE.Match(src) {
		return "cuda"
	}
	return ""
}

// CheckProblem runs every fixture of a problem: correct ones must pass the
// tests (and the first one, with RankCorrect, a leaderboard run), wrong ones
// must fail them. The error is for a check that could not be carried out.
func CheckProblem(ctx context.Context, l Launcher, t *Task, opts CheckOptions) ([]FixtureResult, error) {
	fx, err := t.FindFixtures()
	if err != nil {
		return nil, err
	}
	// KernelBot's problems mostly ship only submission.py, a correct
	// solution: it stands in for solutions/correct.
	if len(fx.Correct) == 0 {
		sub := filepath.Join(t.Dir, "submission.py")
		if _, err := os.Stat(sub); err != nil {
			return nil, fmt.Errorf("check %s: needs a correct fixture, in solutions/correct or as submission.py: %w", t.Name, ErrInvalid)
		}
		fx.Correct = []string{sub}
	}
	type job struct {
		path, want string
		mode       Mode
	}
	var jobs []job
	for i, p := range fx.Correct {
		jobs = append(jobs, job{p, "pass", ModeTest})
		if i == 0 && opts.RankCorrect {
			jobs = append(jobs, job{p, "pass", ModeLeaderboard})
		}
	}
	for _, p := range fx.Wrong {
		jobs = append(jobs, job{p, "fail", ModeTest})
	}
	if opts.Templates {
		for _, key := range TemplateKeys {
			if rel, ok := t.Templates[key]; ok {
				jobs = append(jobs, job{filepath.Join(t.Dir, filepath.FromSlash(rel)), "pass", ModeTest})
			}
		}
	}
	var out []FixtureResult
	if len(fx.Wrong) == 0 {
		out = append(out, FixtureResult{Path: filepath.Join(t.Dir, "solutions", "wrong"), Want: "fail", Mode: ModeTest, OK: true,
			Skipped: "there is no wrong fixture: nothing shows the check refuses a wrong answer"})
	}
	for n, j := range jobs {
		fr := FixtureResult{Path: j.path, Want: j.want, Mode: j.mode}
		src, err := os.ReadFile(j.path)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", t.Name, err)
		}
		dev := opts.Python.Device
		if req := FixtureRequires(src); req != "" && req != dev {
			fr.Skipped = fmt.Sprintf("requires %s, this backend is %s", req, dev)
			fr.OK = true
			out = append(out, fr)
			continue
		}
		work := filepath.Join(opts.Scratch, fmt.Sprintf("%s-%d", t.Name, n))
		if err := os.MkdirAll(work, 0o755); err != nil {
			return nil, fmt.Errorf("check %s: %w", t.Name, err)
		}
		rep, err := Evaluate(ctx, l, t, EvalOptions{Mode: j.mode, Python: opts.Python.Path, Device: dev,
			Env: opts.Env, WorkDir: work, Submission: src})
		if err != nil {
			return nil, fmt.Errorf("check %s fixture %s: %w", t.Name, filepath.Base(j.path), err)
		}
		fr.Report = rep
		fr.OK = rep.Passed == (j.want == "pass")
		if !fr.OK {
			if j.want == "pass" {
				fr.Problems = "should pass but failed: " + rep.Reason
			} else {
				fr.Problems = "should fail but passed"
			}
		}
		out = append(out, fr)
	}
	return out, nil
}

// FixtureLabel names a fixture by its kind and file, for listings.
func FixtureLabel(path string) string {
	return filepath.Base(filepath.Dir(path)) + "/" + strings.TrimSpace(filepath.Base(path))
}
