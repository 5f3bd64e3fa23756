package kernelbox_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection enforces the layering of STYLE.md: problems and
// policies are leaves; gpu, sandbox and queue import only leaves; only
// appliance imports them all; cmd imports only appliance.
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	leaves := map[string]bool{"kernelbox/problems": true, "kernelbox/policies": true}
	allowed := map[string]func(dep string) bool{
		"kernelbox/problems":      func(string) bool { return false },
		"kernelbox/policies":      func(string) bool { return false },
		"kernelbox/gpu":           func(d string) bool { return leaves[d] },
		"kernelbox/sandbox":       func(d string) bool { return leaves[d] },
		"kernelbox/queue":         func(d string) bool { return leaves[d] },
		"kernelbox/appliance":     func(d string) bool { return d != "kernelbox/cmd/kernelbox" },
		"kernelbox/cmd/kernelbox": func(d string) bool { return d == "kernelbox/appliance" },
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, deps := fields[0], fields[1:]
		ok, known := allowed[pkg]
		if !known {
			continue
		}
		for _, d := range deps {
			if strings.HasPrefix(d, "kernelbox/") && !strings.HasPrefix(d, "kernelbox/internal/") && !ok(d) {
				t.Errorf("%s imports %s, which the layering forbids", pkg, d)
			}
		}
	}
}

// TestPackageDocs: every package says what it holds (STYLE.md practice 22).
func TestPackageDocs(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{.Doc}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, doc, _ := strings.Cut(line, "|")
		if strings.TrimSpace(doc) == "" {
			t.Errorf("package %s has no doc comment", pkg)
		}
	}
}
