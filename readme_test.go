package kernelbox_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// numberWords are the counts README spells out; larger ones are digits.
var numberWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
	"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}

// spelled is n as README writes it.
func spelled(n int) string {
	if n < len(numberWords) {
		return numberWords[n]
	}
	return strconv.Itoa(n)
}

// TestReadme_MatchesTree: README's count of bundled problems is the
// library's, and its Docs section names every document under docs/ (a
// file, or its folder) and nothing that is not there. Both drifted once
// (a problem too many, five documents missing) with nothing to say so.
func TestReadme_MatchesTree(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)

	tasks, err := filepath.Glob(filepath.Join("problems", "library", "*", "task.yml"))
	if err != nil {
		t.Fatal(err)
	}
	want := spelled(len(tasks))
	m := regexp.MustCompile(`library of (\w+) problems`).FindStringSubmatch(text)
	if m == nil {
		t.Errorf(`README.md says no "library of N problems"; want it to say %s`, want)
	} else if m[1] != want {
		t.Errorf("README.md says a library of %s problems, want %s: problems/library holds %d task.yml files",
			m[1], want, len(tasks))
	}

	_, docs, ok := strings.Cut(text, "\n## Docs\n")
	if !ok {
		t.Fatal("README.md has no ## Docs section")
	}
	if i := strings.Index(docs, "\n## "); i >= 0 {
		docs = docs[:i]
	}
	var named []string
	for _, m := range regexp.MustCompile("`(docs/[^`]*)`").FindAllStringSubmatch(docs, -1) {
		named = append(named, m[1])
		if _, err := os.Stat(m[1]); err != nil {
			t.Errorf("README.md's Docs names %s: %v", m[1], err)
		}
	}
	err = filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".md" {
			return err
		}
		for _, n := range named {
			if path == n || (strings.HasSuffix(n, "/") && strings.HasPrefix(path, n)) {
				return nil
			}
		}
		t.Errorf("README.md's Docs does not name %s (nor its folder)", path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
