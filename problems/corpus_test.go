package problems_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"kernelbox/policies"
	"kernelbox/problems"
)

// minCorpus is issue 6's bar: at least one fixture per documented
// technique, twenty at least.
const minCorpus = 20

// cheatExpectation is one "# corpus:" line of a fixture in testdata/cheats:
// "scan RULE" (the scanner flags or refuses it), "fail MODE TEXT" (a
// vectoradd evaluation in that mode fails, its reason containing TEXT) or
// "nogain MODE" (in that mode it fails, or its score is no better than
// noGain times the honest solution's: the trick reaches nothing that
// decides a time) or "gpu WHAT" (what happens on the GPU machine,
// checked by TestCheatCorpus_OnGPU).
type cheatExpectation struct {
	kind, mode, text, problem string
}

func corpusExpectations(t *testing.T, path string, src []byte) []cheatExpectation {
	t.Helper()
	var out []cheatExpectation
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "# corpus: ")
		if !ok {
			continue
		}
		kind, arg, _ := strings.Cut(rest, " ")
		e := cheatExpectation{kind: kind, text: arg}
		switch kind {
		case "fail":
			e.mode, e.text, _ = strings.Cut(arg, " ")
		case "nogain":
			// "nogain MODE [PROBLEM]": vectoradd unless a bundled problem
			// is named, for tricks whose gain needs real work to hide.
			e.mode, e.problem, _ = strings.Cut(arg, " ")
			if e.problem == "" {
				e.problem = "vectoradd"
			}
		case "scan", "gpu":
		default:
			t.Fatalf("%s: corpus line %q: want scan, fail, nogain or gpu", path, rest)
		}
		out = append(out, e)
	}
	return out
}

// TestCheatCorpus: every cheat of testdata/cheats is refused or flagged by
// the scanner, or fails on the CPU backend with the defence's message, as
// its "# corpus:" lines say. The GPU-only behaviour is
// TestCheatCorpus_OnGPU's, on the GPU machine.
func TestCheatCorpus(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "cheats", "*.py"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < minCorpus {
		t.Errorf("the corpus has %d cheats, want at least %d", len(files), minCorpus)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exps := corpusExpectations(t, f, src)
		if len(exps) == 0 {
			t.Errorf("%s has no # corpus: line saying how it is defeated", f)
		}
		var rules []string
		for _, fd := range policies.Scan(src) {
			rules = append(rules, fd.Rule)
		}
		for _, e := range exps {
			switch e.kind {
			case "scan":
				if !slices.Contains(rules, e.text) {
					t.Errorf("%s: the scanner found %v, want %s", filepath.Base(f), rules, e.text)
				}
			case "fail":
				t.Run(filepath.Base(f)+"/"+e.mode, func(t *testing.T) {
					t.Parallel()
					mode, err := problems.ParseMode(e.mode)
					if err != nil {
						t.Fatal(err)
					}
					rep := evalFile(t, filepath.Join("library", "vectoradd"), mode, f, nil)
					if rep.Passed || !strings.Contains(rep.Reason, e.text) {
						t.Errorf("passed %v, reason %q; want it to fail with %q", rep.Passed, rep.Reason, e.text)
					}
				})
			case "nogain":
				t.Run(filepath.Base(f)+"/nogain-"+e.mode+"-"+e.problem, func(t *testing.T) {
					t.Parallel()
					mode, err := problems.ParseMode(e.mode)
					if err != nil {
						t.Fatal(err)
					}
					rep := evalFile(t, filepath.Join("library", e.problem), mode, f, nil)
					if !rep.Passed {
						return // no score at all
					}
					got, honest := benchScore(t, rep), honestScore(t, e.problem, mode)
					if got < noGain*honest {
						t.Errorf("scored %.3g s against the honest solution's %.3g s (%.2fx); want no better than %.1fx",
							got, honest, got/honest, noGain)
					}
				})
			}
		}
	}
}

// noGain is the share of the honest solution's score below which a cheat
// counts as having gained: timing on a busy 2-core machine is noisy, and
// the tricks this checks divide their times by 10 or more.
const noGain = 0.4

var honest struct {
	sync.Mutex
	scores map[string]float64 // "problem/mode"
}

// honestScore is the score of a bundled problem's correct solution in
// mode, measured once per test binary.
func honestScore(t *testing.T, problem string, mode problems.Mode) float64 {
	t.Helper()
	honest.Lock()
	defer honest.Unlock()
	key := problem + "/" + string(mode)
	if s, ok := honest.scores[key]; ok {
		return s
	}
	dir := filepath.Join("library", problem)
	sols, err := filepath.Glob(filepath.Join(dir, "solutions", "correct", "*.py"))
	if err != nil || len(sols) == 0 {
		t.Fatalf("%s has no correct solution: %v", problem, err)
	}
	rep := evalFile(t, dir, mode, sols[0], nil)
	if !rep.Passed {
		t.Fatalf("the honest solution failed in %s mode: %s", mode, rep.Reason)
	}
	if honest.scores == nil {
		honest.scores = map[string]float64{}
	}
	honest.scores[key] = benchScore(t, rep)
	return honest.scores[key]
}

// benchScore is a run's geometric mean of its benchmark means.
func benchScore(t *testing.T, rep *problems.Report) float64 {
	t.Helper()
	s, err := problems.Score(problems.RankGeom, rep.Benchmarks)
	if err != nil {
		t.Fatalf("score: %v", err)
	}
	return s
}
