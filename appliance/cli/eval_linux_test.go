//go:build linux && cgo

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/appliance/api"
	"kernelbox/internal/testutil"
	"kernelbox/problems"
)

// TestEval_PhysicsFloor: on the CPU backend, eval holds the benchmarks to
// this host's measured bandwidth, as the daemon does. The floor here (a
// petabyte a case) is one no host reaches, so an honest run is under it:
// it still passes, and the flag is printed and in the JSON.
func TestEval_PhysicsFloor(t *testing.T) {
	t.Parallel()
	it := testutil.RequireTorch(t)
	if it.Device != "cpu" {
		t.Skipf("%s finds device %s; this test is of the CPU backend's measured ceiling", it.Path, it.Device)
	}
	prob := filepath.Join(t.TempDir(), "quick")
	if err := os.CopyFS(prob, os.DirFS(filepath.Join(testutil.RepoRoot(), "appliance", "testdata", "quick"))); err != nil {
		t.Fatal(err)
	}
	testutil.EditFile(t, filepath.Join(prob, "task.yml"), "ranking_by: geom", "ranking_by: geom\nfloor: {bytes: \"1e15 * n\"}")
	args := []string{"eval", "--python", it.Path, "--problem", prob, "--mode", "benchmark", filepath.Join(prob, "solutions", "correct", "double.py")}

	stdout, stderr, code := runCLI(t, args...)
	for _, want := range []string{"physics floor ceilings: this host's measured bandwidth", "flagged for review:",
		"  PHYSICS_FLOOR: benchmark 0 (n: 100; seed: 3): mean", "  PHYSICS_FLOOR: benchmark 1 (n: 1000; seed: 4): mean", "PASSED"} {
		if code != api.ExitOK || !strings.Contains(stdout, want) {
			t.Errorf("kernelbox %v: exit %d, stdout\n%s\nstderr %s\nwant exit %d and %q", args, code, stdout, stderr, api.ExitOK, want)
			break
		}
	}

	stdout, stderr, code = runCLI(t, append(args, "--json")...)
	var doc struct {
		Passed     bool                       `json:"passed"`
		Ceilings   *problems.Ceilings         `json:"ceilings"`
		Benchmarks []problems.BenchmarkResult `json:"benchmarks"`
		Flags      []problems.Flag            `json:"flags"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != api.ExitOK {
		t.Fatalf("kernelbox %v --json: exit %d, %v\nstdout %s\nstderr %s", args, code, err, stdout, stderr)
	}
	if !doc.Passed || doc.Ceilings == nil || doc.Ceilings.BytesPerSec <= 0 || doc.Ceilings.BF16PerSec != 0 {
		t.Errorf("--json: passed %v, ceilings %+v; want passed, held to a bandwidth and no FLOP/s", doc.Passed, doc.Ceilings)
	}
	if len(doc.Flags) != 2 || doc.Flags[0].Rule != problems.FlagPhysicsFloor || doc.Flags[1].Rule != problems.FlagPhysicsFloor {
		t.Errorf("--json flags = %+v, want PHYSICS_FLOOR on both benchmarks", doc.Flags)
	}
	for _, b := range doc.Benchmarks {
		if b.MinNs <= b.Mean {
			t.Errorf("benchmark %d: min_ns %g, mean %g; want the floor above the mean", b.Index, b.MinNs, b.Mean)
		}
	}
}

// TestProblemsCheck_KernelBotLayouts: `problems check` over a competition
// in reference-kernels' form checks every problem that loads, with
// submission.py standing in for a missing solutions/correct and the
// missing solutions/wrong named, and names the one that does not load
// instead of stopping at it (issue 19: pmpp_v2.yaml stopped at its first
// problem, nvidia.yaml checked none of its good four).
func TestProblemsCheck_KernelBotLayouts(t *testing.T) {
	t.Parallel()
	it := testutil.RequireTorch(t)
	set := t.TempDir()
	if err := os.CopyFS(set, os.DirFS(filepath.Join(testutil.RepoRoot(), "problems", "testdata", "kernelbot"))); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(set, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	comp := "name: mixed\nproblems:\n  - {directory: identity_py, name: a}\n  - {directory: broken, name: b}\n" +
		"  - {directory: linalg/ident_py, name: c}\n  - {directory: grouped/ident_list, name: d}\n  - {directory: identity_py, name: e, gpus: [B200]}\n"
	for name, body := range map[string]string{"broken/task.yml": "files: [\n", "mixed.yaml": comp} {
		if err := os.WriteFile(filepath.Join(set, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, code := runCLI(t, "problems", "check", "--python", it.Path, "--no-rank", filepath.Join(set, "mixed.yaml"))
	if code != api.ExitUsage {
		t.Errorf("exit %d, want %d (a problem did not load)", code, api.ExitUsage)
	}
	for _, want := range []string{"broken/task.yml", "not checked, they do not load"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	wants := []string{
		"ident_py: task.yml valid", "ident_list: task.yml valid",
		"✓ ident_list/submission.py", "✓ ident_py/submission.py",
		"- solutions/wrong", "there is no wrong fixture",
	}
	if it.Device == "cpu" {
		wants = append(wants, "skipped: does not run on cpu (gpus: B200)")
	}
	for _, want := range wants {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, stdout, stderr)
		}
	}
	if strings.Contains(stdout, "✗") {
		t.Errorf("a fixture misbehaved:\n%s", stdout)
	}
}
