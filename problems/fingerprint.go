package problems

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Fingerprint is the SHA-256 of what a run of the task and its
// contestants see: task.yml, every file a run is given (the harness, the
// reference, wherever task.yml takes them from) and every template, each
// under its path relative to the task directory. A box records it when a
// problem is loaded and compares it before each run, so a problem file
// changed on disk afterwards (an edited eval.py gives wrong verdicts) is
// caught instead of trusted.
func (t *Task) Fingerprint() (string, error) {
	sorted := append([]string{"task.yml"}, t.Sources()...)
	sort.Strings(sorted)
	all := sha256.New()
	for _, p := range sorted {
		sum, err := fileSHA(filepath.Join(t.Dir, filepath.FromSlash(p)))
		if err != nil {
			return "", fmt.Errorf("fingerprint of %s: %w", t.Name, err)
		}
		fmt.Fprintf(all, "%s %s\n", sum, p)
	}
	return hex.EncodeToString(all.Sum(nil)), nil
}

// Sources lists, once each and relative to the task directory, every
// file the task reads besides task.yml: the files a run is given (the
// contestant's aside) and the templates. KernelBot's may lie above the
// directory (`../eval.py`).
func (t *Task) Sources() []string {
	seen := map[string]bool{}
	var out []string
	add := func(src string) {
		if src = filepath.ToSlash(filepath.Clean(src)); !seen[src] {
			seen[src] = true
			out = append(out, src)
		}
	}
	for _, f := range t.Files {
		if f.Source != SubmissionPlaceholder {
			add(f.Source)
		}
	}
	keys := make([]string, 0, len(t.Templates))
	for k := range t.Templates {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add(t.Templates[k])
	}
	return out
}

func fileSHA(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
