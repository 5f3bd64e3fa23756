package problems_test

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/internal/testutil"
	"kernelbox/problems"
)

// TestHarness_ArchiveCannotShadowTheJudgesModules: an archive's files land
// in the run directory before the judge starts, and Python puts a
// script's folder first on sys.path. A json.py among them was imported by
// the judge in place of the standard library's, with the secret seed and
// the result descriptor in reach (a review demonstrated reading both, and
// a 2.6x better score by slowing the judge's clock). The judge and the
// null worker now search the run directory last; the submission's own
// worker may still use its files.
func TestHarness_ArchiveCannotShadowTheJudgesModules(t *testing.T) {
	t.Parallel()
	it := testutil.RequireTorch(t)
	dir := filepath.Join("library", "vectoradd")
	task, err := problems.LoadTask(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(dir, "templates", "torch.py"))
	if err != nil {
		t.Fatal(err)
	}
	marks := t.TempDir()
	// Imported by whichever process searches the run directory first; it
	// says which one did, then hands on the real json.
	shadow := `import os, sys
role = "judge" if sys.argv and sys.argv[0].endswith("eval.py") else "worker"
open(os.path.join(` + "%q" + `, role + "-" + str(os.getpid())), "w").write(os.environ.get("POPCORN_SEED", ""))
here, saved = os.path.dirname(os.path.abspath(__file__)), list(sys.path)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
del sys.modules["json"]
import json as _json
sys.modules["json"] = _json
sys.path[:] = saved
globals().update(_json.__dict__)
`
	shadow = strings.Replace(shadow, "%q", "'"+marks+"'", 1)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range map[string]string{"submission.py": "import json  # the worker may use its own files\n" + string(tmpl), "json.py": shadow} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	seed := int64(424242)
	rep, err := problems.Evaluate(t.Context(), problems.ExecLauncher{}, task, problems.EvalOptions{
		Mode: problems.ModeTest, Python: it.Path, Device: it.Device, Env: os.Environ(), WorkDir: t.TempDir(),
		Submission: buf.Bytes(), SubmissionName: "solution.zip", Seed: &seed,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed {
		t.Fatalf("the archive's run failed: %s", rep.Reason)
	}
	seen, err := os.ReadDir(marks)
	if err != nil {
		t.Fatal(err)
	}
	var worker bool
	for _, e := range seen {
		if strings.HasPrefix(e.Name(), "judge-") {
			b, _ := os.ReadFile(filepath.Join(marks, e.Name()))
			t.Errorf("the judge imported the archive's json.py (it saw POPCORN_SEED=%q)", b)
		}
		worker = worker || strings.HasPrefix(e.Name(), "worker-")
	}
	if !worker {
		t.Errorf("the submission's worker did not import the archive's json.py: want its own files importable, as in any Python")
	}
}
