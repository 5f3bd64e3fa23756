package problems

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Lang is the language a problem's harness is written in.
type Lang string

// The two languages of the reference-kernels format.
const (
	LangPython Lang = "py"
	LangCUDA   Lang = "cu"
)

// RankingBy says how per-benchmark means become one score.
type RankingBy string

// Ranking methods of the reference-kernels format.
const (
	RankLast RankingBy = "last" // only the last (largest) benchmark
	RankMean RankingBy = "mean" // arithmetic mean of the means
	RankGeom RankingBy = "geom" // geometric mean of the means
)

// SubmissionPlaceholder is the source that marks the contestant's file.
const SubmissionPlaceholder = "@SUBMISSION@"

// DefaultTimeout is KernelBot's default for each of the three timeouts.
const DefaultTimeout = 180 * time.Second

// TemplateKeys are the template names KernelBot accepts.
var TemplateKeys = []string{"CUDA", "Python", "Triton", "HIP", "CuteDSL"}

// File is one file materialised in the harness's working directory.
type File struct {
	Name   string // path inside the working directory
	Source string // path relative to the task directory, or SubmissionPlaceholder

	lineHint int // where the entry is in task.yml, for later checks
}

// Config is the language-specific part of task.yml.
type Config struct {
	Main         string            // py: the harness entry script
	Sources      []string          // cu: files passed to nvcc
	IncludeDirs  []string          // cu
	Defines      map[string]string // cu
	CompileFlags []string          // cu
}

// The values of Task.Harness: whose harness times a problem's runs.
const (
	// HarnessKernelBot, the default: a problem in KernelBot's format
	// (reference.py, task.py, its own eval.py) judged by our harness,
	// which takes the place of its eval.py (isJudgeFile): our seeds, our
	// clock, its generate_input and check_implementation, every phase of
	// a run in one process.
	HarnessKernelBot = "kernelbot"
	// HarnessKernelbox: the problem's files hold our harness (the bundled
	// problems): `eval.py MODE CASES_FILE [MODE CASES_FILE ...]`, every
	// phase of a run in one process, each opened by a "phase: MODE" line.
	HarnessKernelbox = "kernelbox"
	// HarnessOwn, an organiser's opt-in: the problem's own eval.py over
	// KernelBot's contract (`eval.py MODE CASES_FILE`, one mode a
	// process). The submission shares that process with the timer and
	// can see its seeds, so its runs are marked TimedByProblem.
	HarnessOwn = "own"
)

// Task is a loaded, validated problem directory.
type Task struct {
	Dir              string // absolute path of the directory holding task.yml
	Name             string // the directory's base name
	Files            []File
	Lang             Lang
	Config           Config
	Description      string
	Templates        map[string]string // key -> path relative to Dir
	Tests            []Case
	Benchmarks       []Case
	TestTimeout      time.Duration
	BenchmarkTimeout time.Duration
	RankedTimeout    time.Duration
	RankingBy        RankingBy
	MultiGPU         bool

	// Extensions of ours; an old loader ignores them.

	// GPUs lists the GPU types a problem runs on (KernelBot uses it for dev
	// leaderboards); "cpu" is the CPU backend. Empty means any.
	GPUs []string
	// CPUBenchmarks replace Benchmarks on the CPU backend, where model-sized
	// shapes would take minutes.
	CPUBenchmarks []Case
	// Floor, when set, is the physics floor of every benchmark case.
	Floor *Floor
	// Harness says whose harness runs the problem: HarnessKernelBot (the
	// default: our judge over KernelBot's format), HarnessKernelbox (ours,
	// among the problem's files) or HarnessOwn (the problem's eval.py).
	Harness string

	// Warnings are things an author should look at that do not stop the
	// problem from loading, such as fields this loader does not know.
	Warnings []string
}

// SubmissionFile returns the working-directory name of the contestant's file.
func (t *Task) SubmissionFile() string {
	for _, f := range t.Files {
		if f.Source == SubmissionPlaceholder {
			return f.Name
		}
	}
	return ""
}

// RunsOn reports whether the problem lists the GPU type (case-insensitive),
// or lists none.
func (t *Task) RunsOn(gpuType string) bool {
	if len(t.GPUs) == 0 {
		return true
	}
	for _, g := range t.GPUs {
		if strings.EqualFold(g, gpuType) {
			return true
		}
	}
	return false
}

// NeedsTwin says whether a leaderboard run needs its secret-seed twin: a
// second run with a secret mixed into every case seed, so that answers
// precomputed from task.yml's seeds fail. Our judge (judge.py) draws the
// seed of every ranked iteration itself at run time, so a one-device
// problem it judges needs none; a problem's own harness, or our
// multi-GPU path (its ranks still derive their seeds from the case's),
// does.
func (t *Task) NeedsTwin() bool {
	return t.TimedBy() == TimedByProblem || t.MultiGPU
}

// WorldSize is how many GPUs (on the CPU backend, CPU slots) one run of
// the task on device needs: the largest world_size of the cases it runs
// there for a multi-GPU problem, and 1 for any other.
func (t *Task) WorldSize(device string) int {
	if !t.MultiGPU {
		return 1
	}
	n := 1
	for _, set := range [][]Case{t.Tests, t.BenchmarksFor(device)} {
		for _, c := range set {
			v, _ := c.Get("world_size")
			if w, err := strconv.Atoi(v); err == nil && w > n {
				n = w
			}
		}
	}
	return n
}

// BenchmarksFor returns the benchmark cases for a backend: the CPU
// extension on "cpu" where the task has one.
func (t *Task) BenchmarksFor(device string) []Case {
	if device == "cpu" && len(t.CPUBenchmarks) > 0 {
		return t.CPUBenchmarks
	}
	return t.Benchmarks
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// LoadTask reads and validates dir/task.yml. The error lists every problem
// found, each naming the file, the line and the field.
func LoadTask(dir string) (*Task, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("load problem %s: %w", dir, err)
	}
	file := filepath.Join(abs, "task.yml")
	data, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("load problem %s: no task.yml in it: %w", dir, ErrInvalid)
		}
		return nil, fmt.Errorf("load problem %s: %w", dir, err)
	}
	return ParseTask(abs, file, data)
}

// ParseTask validates task.yml content. dir is the directory sources are
// resolved against; file names the file in errors.
func ParseTask(dir, file string, data []byte) (*Task, error) {
	c := &collector{file: file}
	t := &Task{
		Dir:              dir,
		Name:             filepath.Base(dir),
		Templates:        map[string]string{},
		TestTimeout:      DefaultTimeout,
		BenchmarkTimeout: DefaultTimeout,
		RankedTimeout:    DefaultTimeout,
		RankingBy:        RankLast,
	}
	root := parseYAMLDoc(c, data)
	if root == nil {
		return nil, c.err()
	}
	present := map[string]*yaml.Node{}
	for _, kv := range pairs(c, "", root) {
		k, v := kv[0], kv[1]
		present[k.Value] = k
		switch k.Value {
		case "files":
			t.Files = parseFiles(c, v)
		case "lang":
			if s, ok := scalarString(c, "lang", v); ok {
				t.Lang = Lang(s)
				if t.Lang != LangPython && t.Lang != LangCUDA {
					c.add(v.Line, "lang", "must be py or cu, got %q", s)
				}
			}
		case "config":
			t.Config = parseConfig(c, v)
		case "description":
			if s, ok := scalarString(c, "description", v); ok {
				t.Description = s
			}
		case "templates":
			for _, tv := range pairs(c, "templates", v) {
				key := tv[0].Value
				if !slices.Contains(TemplateKeys, key) {
					c.add(tv[0].Line, "templates."+key, "unknown template kind; use one of %s", strings.Join(TemplateKeys, ", "))
					continue
				}
				if s, ok := scalarString(c, "templates."+key, tv[1]); ok {
					t.Templates[key] = s
					checkSource(c, dir, tv[1].Line, "templates."+key, s)
				}
			}
		case "tests":
			t.Tests = parseCases(c, "tests", v)
		case "benchmarks":
			t.Benchmarks = parseCases(c, "benchmarks", v)
		case "cpu_benchmarks":
			t.CPUBenchmarks = parseCases(c, "cpu_benchmarks", v)
		case "test_timeout":
			t.TestTimeout = parseTimeout(c, "test_timeout", v)
		case "benchmark_timeout":
			t.BenchmarkTimeout = parseTimeout(c, "benchmark_timeout", v)
		case "ranked_timeout":
			t.RankedTimeout = parseTimeout(c, "ranked_timeout", v)
		case "ranking_by":
			if s, ok := scalarString(c, "ranking_by", v); ok {
				t.RankingBy = RankingBy(s)
				if !slices.Contains([]RankingBy{RankLast, RankMean, RankGeom}, t.RankingBy) {
					c.add(v.Line, "ranking_by", "must be last, mean or geom, got %q", s)
				}
			}
		case "multi_gpu":
			if b, ok := scalarBool(c, "multi_gpu", v); ok {
				t.MultiGPU = b
			}
		case "gpus":
			t.GPUs = stringList(c, "gpus", v)
		case "floor":
			t.Floor = parseFloor(c, v)
		case "harness":
			if s, ok := scalarString(c, "harness", v); ok {
				if s != HarnessKernelBot && s != HarnessKernelbox && s != HarnessOwn {
					c.add(v.Line, "harness", "must be %s, %s or %s, got %q", HarnessKernelBot, HarnessKernelbox, HarnessOwn, s)
				}
				t.Harness = s
			}
		default:
			t.Warnings = append(t.Warnings, fmt.Sprintf("%s:%d: unknown field %q is ignored", file, k.Line, k.Value))
		}
	}

	for _, req := range []string{"files", "lang", "tests", "benchmarks"} {
		if present[req] == nil {
			c.add(0, req, "is required")
		}
	}
	validateTask(c, t, present)
	validateFloor(c, t)
	if err := c.err(); err != nil {
		return nil, err
	}
	return t, nil
}

func parseFiles(c *collector, n *yaml.Node) []File {
	if n.Kind != yaml.SequenceNode {
		c.add(n.Line, "files", "must be a list of {name, source}, got %s", kindName(n))
		return nil
	}
	var out []File
	for i, item := range n.Content {
		field := fmt.Sprintf("files[%d]", i)
		var f File
		for _, kv := range pairs(c, field, item) {
			switch kv[0].Value {
			case "name":
				f.Name, _ = scalarString(c, field+".name", kv[1])
			case "source":
				f.Source, _ = scalarString(c, field+".source", kv[1])
			default:
				c.add(kv[0].Line, field+"."+kv[0].Value, "unknown key; a file has only name and source")
			}
		}
		if item.Kind == yaml.MappingNode && (f.Name == "" || f.Source == "") {
			c.add(item.Line, field, "needs both name and source")
			continue
		}
		if f.Name != "" {
			if err := checkWorkName(f.Name); err != nil {
				c.add(item.Line, field+".name", "%v", err)
			}
		}
		f.lineHint = item.Line
		out = append(out, f)
	}
	return out
}

// checkWorkName keeps materialised files inside the working directory.
func checkWorkName(name string) error {
	if path.IsAbs(name) || strings.Contains(name, "\\") {
		return fmt.Errorf("%q must be a relative path", name)
	}
	clean := path.Clean(name)
	if clean != name || clean == "." || strings.HasPrefix(clean, "../") || clean == ".." {
		return fmt.Errorf("%q must be a clean relative path inside the working directory", name)
	}
	return nil
}

func checkSource(c *collector, dir string, line int, field, src string) {
	p := filepath.Join(dir, filepath.FromSlash(src))
	st, err := os.Stat(p)
	switch {
	case err != nil:
		c.add(line, field, "source %q: no such file next to task.yml", src)
	case !st.Mode().IsRegular():
		c.add(line, field, "source %q is not a regular file", src)
	}
}

func parseConfig(c *collector, n *yaml.Node) Config {
	var cfg Config
	for _, kv := range pairs(c, "config", n) {
		k, v := kv[0], kv[1]
		field := "config." + k.Value
		switch k.Value {
		case "main":
			cfg.Main, _ = scalarString(c, field, v)
		case "sources":
			cfg.Sources = stringList(c, field, v)
		case "include_dirs":
			cfg.IncludeDirs = stringList(c, field, v)
		case "compile_flags":
			cfg.CompileFlags = stringList(c, field, v)
			for i, f := range cfg.CompileFlags {
				if !strings.HasPrefix(f, "-") {
					c.add(v.Line, fmt.Sprintf("%s[%d]", field, i), "flag %q must start with -", f)
				}
			}
		case "defines":
			cfg.Defines = map[string]string{}
			for _, dv := range pairs(c, field, v) {
				if !identRE.MatchString(dv[0].Value) {
					c.add(dv[0].Line, field+"."+dv[0].Value, "a define must be an identifier")
					continue
				}
				if dv[1].Kind != yaml.ScalarNode {
					c.add(dv[1].Line, field+"."+dv[0].Value, "must be a scalar, got %s", kindName(dv[1]))
					continue
				}
				cfg.Defines[dv[0].Value] = dv[1].Value
			}
		default:
			c.add(k.Line, field, "unknown config key; py takes main, cu takes sources, include_dirs, defines, compile_flags")
		}
	}
	return cfg
}

func parseCases(c *collector, field string, n *yaml.Node) []Case {
	if n.Kind != yaml.SequenceNode {
		c.add(n.Line, field, "must be a list of cases, got %s", kindName(n))
		return nil
	}
	var out []Case
	for i, item := range n.Content {
		cf := fmt.Sprintf("%s[%d]", field, i)
		cs := Case{Values: map[string]string{}}
		for _, kv := range pairs(c, cf, item) {
			k, v := kv[0], kv[1]
			if err := checkCaseKey(k.Value); err != nil {
				c.add(k.Line, cf, "%v", err)
				continue
			}
			val, err := caseValue(v)
			if err != nil {
				c.add(v.Line, cf+"."+k.Value, "%v", err)
				continue
			}
			cs.Set(k.Value, val)
		}
		if item.Kind == yaml.MappingNode && len(item.Content) == 0 {
			c.add(item.Line, cf, "is empty")
		}
		out = append(out, cs)
	}
	if len(out) == 0 {
		c.add(n.Line, field, "has no cases")
	}
	return out
}

// caseValue is a case's value as the cases file carries it: a scalar's
// text, or a flat list of scalars written as Python prints a list
// ("[96, 128]"), which KernelBot's grouped-GEMM harness reads back.
func caseValue(v *yaml.Node) (string, error) {
	if v.Kind == yaml.SequenceNode {
		items := make([]string, len(v.Content))
		for i, it := range v.Content {
			if it.Kind != yaml.ScalarNode || isNull(it) {
				return "", fmt.Errorf("a list value holds only numbers, true/false or words, got %s", kindName(it))
			}
			if !caseValueRE.MatchString(it.Value) { // a scalar, not a list written as a string
				return "", fmt.Errorf("list item %q must be a number, true/false or a word of letters, digits, _ . + -", it.Value)
			}
			items[i] = it.Value
		}
		return "[" + strings.Join(items, ", ") + "]", nil
	}
	if v.Kind != yaml.ScalarNode || isNull(v) {
		return "", fmt.Errorf("must be a number, true/false, a word or a list of them, got %s", kindName(v))
	}
	return v.Value, checkCaseValue(v.Value)
}

func parseTimeout(c *collector, field string, n *yaml.Node) time.Duration {
	v, ok := scalarInt(c, field, n)
	if !ok {
		return DefaultTimeout
	}
	if v <= 0 || v > 24*3600 {
		c.add(n.Line, field, "must be between 1 and 86400 seconds, got %d", v)
		return DefaultTimeout
	}
	return time.Duration(v) * time.Second
}

func validateTask(c *collector, t *Task, present map[string]*yaml.Node) {
	names := map[string]bool{}
	subs := 0
	for i, f := range t.Files {
		field := fmt.Sprintf("files[%d]", i)
		if names[f.Name] {
			c.add(f.lineHint, field+".name", "%q is listed twice", f.Name)
		}
		names[f.Name] = true
		if f.Source == SubmissionPlaceholder {
			subs++
			continue
		}
		checkSource(c, t.Dir, f.lineHint, field+".source", f.Source)
	}
	if present["files"] != nil && subs != 1 {
		c.add(present["files"].Line, "files", "exactly one file must have source %s, found %d", SubmissionPlaceholder, subs)
	}

	switch t.Lang {
	case LangPython:
		if t.Config.Main == "" {
			c.add(lineOf(present["config"]), "config.main", "is required for lang py (the harness script, usually eval.py)")
		} else if !names[t.Config.Main] {
			c.add(lineOf(present["config"]), "config.main", "%q is not one of the files", t.Config.Main)
		}
	case LangCUDA:
		if len(t.Config.Sources) == 0 {
			c.add(lineOf(present["config"]), "config.sources", "is required for lang cu (the files passed to nvcc)")
		}
		for i, s := range t.Config.Sources {
			if !names[s] {
				c.add(lineOf(present["config"]), fmt.Sprintf("config.sources[%d]", i), "%q is not one of the files", s)
			}
		}
	}

	for _, set := range []struct {
		field string
		cases []Case
	}{{"tests", t.Tests}, {"benchmarks", t.Benchmarks}, {"cpu_benchmarks", t.CPUBenchmarks}} {
		for i, cs := range set.cases {
			cf := fmt.Sprintf("%s[%d]", set.field, i)
			if s, ok := cs.Get("seed"); ok {
				if _, err := strconv.ParseInt(s, 10, 64); err != nil {
					c.add(lineOf(present[set.field]), cf+".seed", "must be an integer, got %q", s)
				}
			} else if len(cs.Keys) > 0 {
				t.Warnings = append(t.Warnings, fmt.Sprintf("%s: %s has no seed: its inputs are the same for every contestant and cannot be re-seeded in secret runs", c.file, cf))
			}
			if t.MultiGPU {
				ws, ok := cs.Get("world_size")
				n, err := strconv.Atoi(ws)
				if !ok || err != nil || n < 1 {
					c.add(lineOf(present[set.field]), cf+".world_size", "multi_gpu problems need a positive integer world_size in every case")
				}
			}
		}
	}
}

func lineOf(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// Fixtures are the known-good and known-bad submissions of a problem, found
// under solutions/correct and solutions/wrong as reference-kernels lays them out.
type Fixtures struct {
	Correct []string // absolute paths
	Wrong   []string
}

// FindFixtures lists a task's fixtures in name order.
func (t *Task) FindFixtures() (Fixtures, error) {
	var fx Fixtures
	for _, kind := range []struct {
		dir string
		dst *[]string
	}{{"correct", &fx.Correct}, {"wrong", &fx.Wrong}} {
		entries, err := os.ReadDir(filepath.Join(t.Dir, "solutions", kind.dir))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fx, fmt.Errorf("list fixtures of %s: %w", t.Name, err)
		}
		for _, e := range entries {
			if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
				*kind.dst = append(*kind.dst, filepath.Join(t.Dir, "solutions", kind.dir, e.Name()))
			}
		}
		sort.Strings(*kind.dst)
	}
	return fx, nil
}
