package problems

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// writeProblem makes a problem directory with the given task.yml and the
// files a minimal valid one refers to.
func writeProblem(t *testing.T, taskYML string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"reference.py": "", "eval.py": "", "tmpl.py": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "task.yml"), []byte(taskYML), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const validTask = `files:
  - {name: submission.py, source: "@SUBMISSION@"}
  - {name: reference.py, source: reference.py}
  - {name: eval.py, source: eval.py}
lang: py
config: {main: eval.py}
templates: {Python: tmpl.py}
tests:
  - {size: 127, seed: 1}
  - {size: 128, seed: 2}
benchmarks:
  - {size: 4096, seed: 3}
test_timeout: 60
ranking_by: geom
`

func TestLoadTask_Valid(t *testing.T) {
	t.Parallel()
	task, err := LoadTask(writeProblem(t, validTask))
	if err != nil {
		t.Fatalf("LoadTask() = %v", err)
	}
	if got, want := task.SubmissionFile(), "submission.py"; got != want {
		t.Errorf("SubmissionFile() = %q, want %q", got, want)
	}
	if task.TestTimeout != 60*time.Second || task.BenchmarkTimeout != DefaultTimeout {
		t.Errorf("timeouts = %v, %v; want 60s and the default", task.TestTimeout, task.BenchmarkTimeout)
	}
	if got := FormatCases(task.Tests); got != "size: 127; seed: 1\nsize: 128; seed: 2\n" {
		t.Errorf("FormatCases(tests) = %q", got)
	}
	if task.RankingBy != RankGeom || task.Lang != LangPython || task.Config.Main != "eval.py" {
		t.Errorf("task = %+v", task)
	}
}

// TestLoadTask_ListCases: a list-valued case (KernelBot's grouped GEMM:
// `m: [96, 128]`) reaches a problem's own harness as Python prints the
// list, and the cases file reads back (issue 19).
func TestLoadTask_ListCases(t *testing.T) {
	t.Parallel()
	task, err := LoadTask(writeProblem(t, strings.Replace(validTask, "{size: 127, seed: 1}", `{"m": [96, 128], "k": [256], "g": 2, "seed": 1111}`, 1)))
	if err != nil {
		t.Fatalf("LoadTask() = %v", err)
	}
	file := FormatCases(task.Tests)
	if want := "m: [96, 128]; k: [256]; g: 2; seed: 1111\nsize: 128; seed: 2\n"; file != want {
		t.Errorf("FormatCases(tests) = %q, want %q", file, want)
	}
	back, err := ParseCases(strings.NewReader(file))
	if err != nil {
		t.Fatalf("ParseCases() = %v", err)
	}
	if diff := cmp.Diff(task.Tests, back); diff != "" {
		t.Errorf("cases read back differ (-loaded +read):\n%s", diff)
	}
}

func TestLoadTask_Invalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yml  string
		want []string // substrings of the error, each naming file:line field
	}{
		{"not yaml", "files: [", []string{"task.yml: not valid YAML"}},
		{"not a mapping", "- a\n- b\n", []string{"task.yml:1: top level must be a mapping"}},
		{"missing required", "lang: py\nconfig: {main: eval.py}\n", []string{"files: is required", "tests: is required", "benchmarks: is required"}},
		{"bad lang", strings.Replace(validTask, "lang: py", "lang: rust", 1), []string{`task.yml:5: lang: must be py or cu, got "rust"`}},
		{"bad ranking", strings.Replace(validTask, "ranking_by: geom", "ranking_by: best", 1), []string{`ranking_by: must be last, mean or geom`}},
		{"no submission", strings.Replace(validTask, `"@SUBMISSION@"`, "reference.py", 1), []string{"files: exactly one file must have source @SUBMISSION@, found 0"}},
		{"missing source", strings.Replace(validTask, "source: eval.py", "source: ../nowhere/eval.py", 1), []string{`task.yml:4: files[2].source: source "../nowhere/eval.py": no such file`}},
		{"escaping name", strings.Replace(validTask, "name: eval.py", "name: ../eval.py", 1), []string{`files[2].name: "../eval.py" must be a clean relative path`}},
		{"main not a file", strings.Replace(validTask, "config: {main: eval.py}", "config: {main: run.py}", 1), []string{`config.main: "run.py" is not one of the files`}},
		{"timeout type", strings.Replace(validTask, "test_timeout: 60", "test_timeout: soon", 1), []string{`task.yml:13: test_timeout: must be an integer, got the scalar "soon"`}},
		{"timeout range", strings.Replace(validTask, "test_timeout: 60", "test_timeout: -5", 1), []string{"test_timeout: must be between 1 and 86400 seconds, got -5"}},
		{"case nested list", strings.Replace(validTask, "{size: 127, seed: 1}", "{size: [1, [2]], seed: 1}", 1), []string{"tests[0].size: a list value holds only numbers, true/false or words, got a list"}},
		{"case list in a string", strings.Replace(validTask, "{size: 127, seed: 1}", `{size: ["[1, 2]", 3], seed: 1}`, 1), []string{`tests[0].size: list item "[1, 2]" must be`}},
		{"case map value", strings.Replace(validTask, "{size: 127, seed: 1}", "{size: {a: 1}, seed: 1}", 1), []string{"tests[0].size: must be a number, true/false, a word or a list of them, got a mapping"}},
		{"case bad value", strings.Replace(validTask, "{size: 127, seed: 1}", `{size: "1; 2", seed: 1}`, 1), []string{`tests[0].size: value "1; 2" must be`}},
		{"case bad seed", strings.Replace(validTask, "{size: 127, seed: 1}", "{size: 127, seed: abc}", 1), []string{`tests[0].seed: must be an integer, got "abc"`}},
		{"no cases", strings.Replace(validTask, "benchmarks:\n  - {size: 4096, seed: 3}", "benchmarks: []", 1), []string{"benchmarks: has no cases"}},
		{"duplicate key", validTask + "lang: cu\n", []string{"task.yml:15: lang: appears twice"}},
		{"unknown template", strings.Replace(validTask, "{Python: tmpl.py}", "{Rust: tmpl.py}", 1), []string{"templates.Rust: unknown template kind"}},
		{"multi_gpu needs world_size", validTask + "multi_gpu: true\n", []string{"tests[0].world_size: multi_gpu problems need a positive integer world_size"}},
		{"floor bad formula", validTask + "floor: {bytes: \"3 * size *\"}\n", []string{`task.yml:15: floor.bytes: formula "3 * size *": at column 11: the formula ends too soon`}},
		{"floor unknown name", validTask + "floor: {bytes: \"2 * rows\"}\n", []string{`floor.bytes: on benchmarks[0] (size: 4096; seed: 3): the case has no number "rows"`}},
		{"floor negative", validTask + "floor: {flops: \"size - 5000\"}\n", []string{"floor.flops: on benchmarks[0] (size: 4096; seed: 3): is -904, not a count"}},
		{"floor bad math", validTask + "floor: {flops: size, math: fp4}\n", []string{`floor.math: must be one of bf16, int8, fp8, got "fp4"`}},
		{"floor empty", validTask + "floor: {math: int8}\n", []string{"floor: needs bytes, reads or flops"}},
		{"floor reads over bytes", validTask + "floor: {bytes: \"size\", reads: \"2 * size\"}\n", []string{"task.yml:15: floor.reads: on benchmarks[0] (size: 4096; seed: 3): 8192 is more than floor.bytes, 4096"}},
		{"floor reads negative", validTask + "floor: {reads: \"size - 5000\"}\n", []string{"floor.reads: on benchmarks[0] (size: 4096; seed: 3): is -904, not a count"}},
		{"floor reads unknown name", validTask + "floor: {bytes: size, reads: \"rows\"}\n", []string{`floor.reads: on benchmarks[0] (size: 4096; seed: 3): the case has no number "rows"`}},
		{"floor unknown function", validTask + "floor: {bytes: \"log(size)\"}\n", []string{`unknown function "log"`}},
		{"bad harness", validTask + "harness: theirs\n", []string{`harness: must be kernelbot, kernelbox or own, got "theirs"`}},
		{"cu needs sources", strings.Replace(validTask, "lang: py\nconfig: {main: eval.py}", "lang: cu\nconfig: {sources: [main.cu]}", 1), []string{`config.sources[0]: "main.cu" is not one of the files`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadTask(writeProblem(t, tt.yml))
			if err == nil {
				t.Fatalf("LoadTask() = nil error, want one mentioning %q", tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("LoadTask() error %v does not wrap ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("LoadTask() error =\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadTask_Warnings(t *testing.T) {
	t.Parallel()
	yml := strings.Replace(validTask, "{size: 128, seed: 2}", "{size: 128}", 1) + "leaderboard_icon: fire\n"
	task, err := LoadTask(writeProblem(t, yml))
	if err != nil {
		t.Fatalf("LoadTask() = %v", err)
	}
	joined := strings.Join(task.Warnings, "\n")
	for _, w := range []string{`unknown field "leaderboard_icon" is ignored`, "tests[1] has no seed"} {
		if !strings.Contains(joined, w) {
			t.Errorf("Warnings = %q, want one containing %q", task.Warnings, w)
		}
	}
}

func TestLoadTask_Missing(t *testing.T) {
	t.Parallel()
	_, err := LoadTask(t.TempDir())
	if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no task.yml") {
		t.Fatalf("LoadTask(empty dir) = %v, want a 'no task.yml' ErrInvalid", err)
	}
}

func TestLibrary_AllProblemsLoad(t *testing.T) {
	t.Parallel()
	names := LibraryNames()
	if len(names) < 12 {
		t.Fatalf("LibraryNames() = %v, want at least 12 problems", names)
	}
	for _, name := range names {
		task, err := LoadTask(filepath.Join("library", name))
		if err != nil {
			t.Errorf("LoadTask(%s) = %v", name, err)
			continue
		}
		if len(task.Warnings) > 0 {
			t.Errorf("%s: warnings %q", name, task.Warnings)
		}
		if len(task.Tests) < 5 {
			t.Errorf("%s: %d tests, want at least 5", name, len(task.Tests))
		}
		keys := []string{"Python", "Triton", "CUDA"}
		if task.MultiGPU {
			// The work of a communication problem is the collective; its
			// Triton or CUDA versions need several GPUs to be checked.
			keys = keys[:1]
		}
		for _, key := range keys {
			if task.Templates[key] == "" {
				t.Errorf("%s: no %s template", name, key)
			}
		}
		fx, err := task.FindFixtures()
		if err != nil || len(fx.Correct) == 0 || len(fx.Wrong) == 0 {
			t.Errorf("%s: fixtures %+v, %v; want at least one correct and one wrong", name, fx, err)
		}
		if task.Description == "" {
			t.Errorf("%s: no description", name)
		}
		// A bundled floor says what its kernels must read (docs/problem-format.md,
		// "The bundled problems' floors"): without it, the floor has only its slack.
		if task.Floor != nil && task.Floor.Reads == nil {
			t.Errorf("%s: a floor without reads", name)
		}
	}
}

func TestLoadCompetition_Library(t *testing.T) {
	t.Parallel()
	comp, err := LoadCompetition(filepath.Join("library", LibraryCompetition))
	if err != nil {
		t.Fatalf("LoadCompetition() = %v", err)
	}
	var got []string
	for _, p := range comp.Problems {
		got = append(got, p.Name)
		if p.Deadline.Year() != 2100 {
			t.Errorf("%s: deadline %v, want the competition's 2100-12-31", p.Name, p.Deadline)
		}
	}
	// The competition file opens every bundled problem.
	want := LibraryNames()
	if diff := cmp.Diff(sortedCopy(want), sortedCopy(got)); diff != "" {
		t.Errorf("competition problems differ from the library (-library +competition):\n%s", diff)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func TestLoadCompetition_Invalid(t *testing.T) {
	t.Parallel()
	dir := writeProblem(t, validTask)
	comp := filepath.Join(filepath.Dir(dir), "comp.yaml")
	body := "description: x\ndeadline: tomorrow\nproblems:\n  - {directory: " + filepath.Base(dir) + ", gpus: [H200]}\n  - {directory: missing}\n  - {name: nodir}\n"
	if err := os.WriteFile(comp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadCompetition(comp)
	if err == nil {
		t.Fatal("LoadCompetition() = nil error")
	}
	for _, w := range []string{"name: is required", `comp.yaml:2: deadline: "tomorrow" is not a date`, "comp.yaml:5: problems[1]: load problem", "problems[2].directory: is required"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("LoadCompetition() error =\n%v\nwant it to contain %q", err, w)
		}
	}
}

// TestLoadCompetition_BadProblem: a problem whose directory does not load
// is named, and the competition's other problems still load.
func TestLoadCompetition_BadProblem(t *testing.T) {
	t.Parallel()
	dir := writeProblem(t, validTask)
	comp := filepath.Join(filepath.Dir(dir), "comp.yaml")
	body := "name: c\nproblems:\n  - {directory: " + filepath.Base(dir) + ", gpus: [H200]}\n  - {directory: missing, name: gone}\n"
	if err := os.WriteFile(comp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCompetition(comp)
	if err != nil {
		t.Fatalf("LoadCompetition() = %v, want the good problem loaded", err)
	}
	if len(c.Problems) != 1 || c.Problems[0].Name != filepath.Base(dir) {
		t.Errorf("problems = %+v, want %s alone", c.Problems, filepath.Base(dir))
	}
	if len(c.Bad) != 1 || c.Bad[0].Name != "gone" || c.Bad[0].Directory != "missing" ||
		!strings.Contains(c.Bad[0].Err.Error(), "comp.yaml:4: problems[1]: load problem") {
		t.Errorf("bad = %+v, want gone (missing) with its line", c.Bad)
	}
	if err := c.BadErr(); err == nil || !strings.Contains(err.Error(), "problems[1]") {
		t.Errorf("BadErr() = %v", err)
	}
}

func TestParseDeadline(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"2100-12-31":                "2100-12-31T00:00:00Z",
		"2025-11-29 6:59":           "2025-11-29T06:59:00Z",
		"2025-11-29 16:59":          "2025-11-29T16:59:00Z",
		"2026-03-01T12:00:00+01:00": "2026-03-01T11:00:00Z",
	} {
		got, err := ParseDeadline(in)
		if err != nil || got.Format(time.RFC3339) != want {
			t.Errorf("ParseDeadline(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	if _, err := ParseDeadline("next week"); err == nil {
		t.Error(`ParseDeadline("next week") = nil error`)
	}
}

func FuzzParseTask(f *testing.F) {
	f.Add([]byte(validTask))
	f.Add([]byte("files: [{name: a, source: b}]\nlang: cu\nconfig: {sources: [a], defines: {X: 1}}\n"))
	f.Add([]byte("tests: [{a: 1}, 3, [x]]\n"))
	dir := f.TempDir()
	for _, name := range []string{"reference.py", "eval.py", "tmpl.py"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := ParseTask(dir, "task.yml", data)
		if err == nil && task == nil {
			t.Fatal("ParseTask() = nil, nil")
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("ParseTask() error %v does not wrap ErrInvalid", err)
		}
		if err == nil {
			// Whatever loads must write a cases file that reads back the same.
			back, err := ParseCases(strings.NewReader(FormatCases(task.Tests)))
			if err != nil {
				t.Fatalf("ParseCases(FormatCases(tests)) = %v", err)
			}
			if diff := cmp.Diff(task.Tests, back); diff != "" {
				t.Fatalf("cases round trip (-want +got):\n%s", diff)
			}
		}
	})
}

// reference-kernels' pmpp_v2.yaml has deadline: "" at the top, meaning none,
// and dates on its problems.
func TestLoadCompetition_EmptyDeadline(t *testing.T) {
	t.Parallel()
	dir := writeProblem(t, validTask)
	comp := filepath.Join(filepath.Dir(dir), "comp.yaml")
	body := "name: practice\ndeadline: \"\"\ndescription: \"\"\nproblems:\n  - directory: " + filepath.Base(dir) +
		"\n    name: a\n    deadline: \"2025-12-30\"\n    gpus:\n      - H100\n  - {directory: " + filepath.Base(dir) + ", name: b, deadline: \"\"}\n"
	if err := os.WriteFile(comp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCompetition(comp)
	if err != nil {
		t.Fatalf("LoadCompetition() = %v", err)
	}
	if !c.Deadline.IsZero() || len(c.Problems) != 2 {
		t.Fatalf("LoadCompetition() = deadline %v, %d problems; want none and 2", c.Deadline, len(c.Problems))
	}
	if got := c.Problems[0].Deadline.Format("2006-01-02"); got != "2025-12-30" {
		t.Errorf("problem a deadline = %s, want 2025-12-30", got)
	}
	if !c.Problems[1].Deadline.IsZero() {
		t.Errorf("problem b deadline = %v, want none", c.Problems[1].Deadline)
	}
}

// TestTask_TimedBy: a KernelBot-format problem our judge cannot take
// keeps its own harness, and says why, rather than fail to load.
func TestTask_TimedBy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, yml, why string // why: part of HarnessNote, "" for our judge
	}{
		{"kernelbot format", validTask, ""},
		{"opt-in", validTask + "harness: own\n", "harness: own"},
		{"judge file clash", strings.Replace(validTask, "  - {name: eval.py, source: eval.py}", "  - {name: eval.py, source: eval.py}\n  - {name: wire.py, source: tmpl.py}", 1), "its file wire.py"},
		{"clash with a newer judge file", strings.Replace(validTask, "  - {name: eval.py, source: eval.py}", "  - {name: eval.py, source: eval.py}\n  - {name: ranklink.py, source: tmpl.py}", 1), "its file ranklink.py"},
		{"no reference", strings.Replace(validTask, "  - {name: reference.py, source: reference.py}\n", "", 1), "no reference.py"},
		{"not submission.py", strings.Replace(validTask, "name: submission.py", "name: solution.py", 1), `"solution.py"`},
		{"multi-GPU", strings.ReplaceAll(validTask, "seed: ", "world_size: 2, seed: ") + "multi_gpu: true\n", "multi_gpu"},
	} {
		task, err := LoadTask(writeProblem(t, tt.yml))
		if err != nil {
			t.Fatalf("%s: LoadTask() = %v", tt.name, err)
		}
		note := task.HarnessNote()
		want := TimedByJudge
		if tt.why != "" {
			want = TimedByProblem
		}
		if got := task.TimedBy(); got != want || (tt.why == "") != (note == "") || !strings.Contains(note, tt.why) || (note != "" && !strings.HasPrefix(note, TimedByNote)) {
			t.Errorf("%s: TimedBy() = %q, HarnessNote() = %q; want %q, a note containing %q", tt.name, got, note, want, tt.why)
		}
		if task.NeedsTwin() != (want == TimedByProblem || task.MultiGPU) {
			t.Errorf("%s: NeedsTwin() = %v with TimedBy %q", tt.name, task.NeedsTwin(), want)
		}
	}
}

// TestTask_NeedsTwin: the secret-seed twin is dropped only where the judge
// draws every ranked seed itself (our harness, one device, whether the
// problem brings it or our judge takes a KernelBot harness's place); the
// opt-in own harness is in kernelbot_test.go.
func TestTask_NeedsTwin(t *testing.T) {
	for _, tt := range []struct {
		dir  string
		want bool
	}{
		{filepath.Join("library", "vectoradd"), false},
		{filepath.Join("library", "matmul"), false},
		{filepath.Join("library", "allreduce"), true},                  // multi-GPU: ranks derive their seeds
		{filepath.Join("testdata", "kernelbot", "identity_py"), false}, // our judge takes its eval.py's place
	} {
		task, err := LoadTask(tt.dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := task.NeedsTwin(); got != tt.want {
			t.Errorf("%s: NeedsTwin() = %v, want %v (harness %q, multi-GPU %v)", tt.dir, got, tt.want, task.Harness, task.MultiGPU)
		}
	}
}
