package kernelbox_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection enforces the layering of docs/architecture.md (rule
// 2): problems and policies are leaves; gpu, sandbox and queue import only
// leaves; appliance/api (the wire contract) imports only leaves;
// appliance/store (the daemon's state) only the contract, the queue and
// leaves; appliance/runner only those, gpu and sandbox; appliance (the
// daemon) imports them all but not the command line; appliance/cli
// imports the daemon only for the commands that run it; cmd imports only
// appliance/cli. The web page and popcorn's protocol take the contract and
// the state, never the daemon. A package without a rule fails the test: a
// new room gets its place in the layering when it is made. The test-only
// packages (the fakes and helpers of tests) are imported by no production
// package.
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
		"kernelbox/appliance/api": func(d string) bool { return leaves[d] },
		"kernelbox/appliance/store": func(d string) bool {
			return leaves[d] || d == "kernelbox/appliance/api" || d == "kernelbox/queue"
		},
		// The runner: the contract, the store, and the systems a run uses;
		// never the daemon that wires it.
		"kernelbox/appliance/runner": func(d string) bool {
			return leaves[d] || d == "kernelbox/appliance/api" || d == "kernelbox/appliance/store" ||
				d == "kernelbox/queue" || d == "kernelbox/gpu" || d == "kernelbox/sandbox"
		},
		// The page and popcorn-cli's protocol: the contract and the state
		// they render, never the daemon that serves them.
		"kernelbox/appliance/web": func(d string) bool {
			return leaves[d] || d == "kernelbox/appliance/api" || d == "kernelbox/appliance/store" || d == "kernelbox/gpu"
		},
		"kernelbox/appliance/popcorn": func(d string) bool {
			return leaves[d] || d == "kernelbox/appliance/api" || d == "kernelbox/appliance/store"
		},
		"kernelbox/appliance":     func(d string) bool { return d != "kernelbox/cmd/kernelbox" && d != "kernelbox/appliance/cli" },
		"kernelbox/appliance/cli": func(d string) bool { return d != "kernelbox/cmd/kernelbox" },
		"kernelbox/cmd/kernelbox": func(d string) bool { return d == "kernelbox/appliance/cli" },
		// The module's root holds only its tests of the tree (README,
		// layering): it imports nothing of ours.
		"kernelbox": func(string) bool { return false },
		// Test-only: each fakes or helps with the package it sits under.
		"kernelbox/gpu/gputest":         func(d string) bool { return d == "kernelbox/gpu" },
		"kernelbox/sandbox/sandboxtest": func(d string) bool { return d == "kernelbox/sandbox" },
		"kernelbox/internal/testutil":   func(d string) bool { return leaves[d] },
	}
	testOnly := map[string]bool{"kernelbox/gpu/gputest": true, "kernelbox/sandbox/sandboxtest": true, "kernelbox/internal/testutil": true}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, deps := fields[0], fields[1:]
		ok, known := allowed[pkg]
		if !known {
			t.Errorf("package %s has no rule in the layering: give it one here and in docs/architecture.md", pkg)
			continue
		}
		for _, d := range deps {
			switch {
			case testOnly[d] && !testOnly[pkg]:
				t.Errorf("%s imports %s, a test-only package, into production code", pkg, d)
			case strings.HasPrefix(d, "kernelbox/") && !testOnly[d] && !ok(d):
				t.Errorf("%s imports %s, which the layering forbids", pkg, d)
			}
		}
	}
}

// TestPackageDocs: every package says what it holds (docs/architecture.md, rule 22).
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

// TestClientBuildIsLean: the contestant's client (a build without cgo, as
// for macOS and Windows laptops) links none of the daemon's systems: no
// libcontainer, libseccomp, NVML, SQLite, nor the packages that own them.
func TestClientBuildIsLean(t *testing.T) {
	for _, target := range []string{"darwin/arm64", "windows/amd64", "linux/amd64"} {
		goos, goarch, _ := strings.Cut(target, "/")
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./cmd/kernelbox")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps for %s: %v", target, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, banned := range []string{"kernelbox/appliance", "kernelbox/sandbox", "kernelbox/gpu", "kernelbox/queue",
				"github.com/opencontainers/", "github.com/seccomp/", "github.com/NVIDIA/", "github.com/mattn/go-sqlite3", "github.com/containerd/"} {
				if dep == banned || (strings.HasSuffix(banned, "/") && strings.HasPrefix(dep, banned)) {
					t.Errorf("the %s client build links %s", target, dep)
				}
			}
		}
	}
}
