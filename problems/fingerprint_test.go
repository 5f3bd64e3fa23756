package problems

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFingerprint: a change to any file a run uses or a contestant sees,
// wherever task.yml takes it from, changes the fingerprint; a file the
// task does not use does not.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.CopyFS(root, Library()); err != nil {
		t.Fatal(err)
	}
	task, err := LoadTask(filepath.Join(root, "vectoradd"))
	if err != nil {
		t.Fatal(err)
	}
	base, err := task.Fingerprint()
	if err != nil || len(base) != 64 {
		t.Fatalf("Fingerprint() = %q, %v", base, err)
	}
	for _, c := range []struct {
		file    string
		changes bool
	}{
		{"harness/judge.py", true}, // ../harness/judge.py in task.yml
		{"vectoradd/reference.py", true},
		{"vectoradd/templates/triton.py", true},
		{"vectoradd/task.yml", true},
		{"vectoradd/unused.txt", false},
	} {
		p := filepath.Join(root, filepath.FromSlash(c.file))
		old, _ := os.ReadFile(p)
		if err := os.WriteFile(p, append(append([]byte(nil), old...), "\n# edited\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := task.Fingerprint()
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if (got != base) != c.changes {
			t.Errorf("editing %s: fingerprint changed = %v, want %v", c.file, got != base, c.changes)
		}
		if old == nil {
			os.Remove(p)
		} else if err := os.WriteFile(p, old, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(root, "harness", "wire.py")); err != nil {
		t.Fatal(err)
	}
	if _, err := task.Fingerprint(); err == nil {
		t.Error("Fingerprint() with a missing file = nil error")
	}
}
