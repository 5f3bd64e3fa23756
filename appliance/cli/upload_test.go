package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestProblemUpload: a problem directory uploads the files its task.yml
// takes from up to two levels above it, in their layout, and nothing a
// hostile task.yml could reach beyond: further up, hidden, or through a
// symbolic link (issue 19).
func TestProblemUpload(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	secrets := t.TempDir()
	files := map[string]string{
		"set/family/eval.py":        "",
		"set/shared/utils.py":       "",
		"set/family/prob/ref.py":    "",
		"set/family/.hidden/x.py":   "",
		"set/family/prob/templ.py":  "",
		"set/family/prob/sub/ok.py": "",
	}
	for name, body := range files {
		p := filepath.Join(base, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(secrets, "id_rsa"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secrets, filepath.Join(base, "set", "family", "keys")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "outside.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	task := func(extra string) string {
		return "files:\n  - {name: submission.py, source: \"@SUBMISSION@\"}\n  - {name: eval.py, source: ../eval.py}\n" +
			"  - {name: ref.py, source: ref.py}\n" + extra + "lang: py\nconfig: {main: eval.py}\n" +
			"tests:\n  - {n: 1, seed: 1}\nbenchmarks:\n  - {n: 1, seed: 1}\n"
	}
	prob := filepath.Join(base, "set", "family", "prob")
	for _, tc := range []struct {
		name, extra, want string
		entries           []string
	}{
		{"family files", "  - {name: utils.py, source: ../../shared/utils.py}\n", "",
			[]string{"family/prob", "family/eval.py", "shared/utils.py"}},
		{"three levels up", "  - {name: o.py, source: ../../../outside.py}\n", "more than 2 directories above it", nil},
		{"hidden", "  - {name: x.py, source: ../.hidden/x.py}\n", "hidden file", nil},
		{"through a link", "  - {name: k, source: ../keys/id_rsa}\n", "symbolic link", nil},
	} {
		if err := os.WriteFile(filepath.Join(prob, "task.yml"), []byte(task(tc.extra)), 0o644); err != nil {
			t.Fatal(err)
		}
		root, entries, err := problemUpload(prob)
		switch {
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: problemUpload() = %v, %v; want an error saying %q", tc.name, entries, err, tc.want)
		case tc.want == "" && err != nil:
			t.Errorf("%s: problemUpload() = %v", tc.name, err)
		case tc.want == "":
			real, _ := filepath.EvalSymlinks(filepath.Join(base, "set"))
			got := make([]string, len(entries))
			for i, e := range entries {
				got[i] = filepath.ToSlash(e)
			}
			if root != real || !slices.Equal(got, tc.entries) {
				t.Errorf("%s: problemUpload() = %s %v; want %s %v", tc.name, root, got, real, tc.entries)
			}
		}
	}
}
