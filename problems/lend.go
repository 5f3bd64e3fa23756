package problems

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeJudge writes our harness (the bundled library's harness directory)
// into dir, over what is there: a KernelBot problem's eval.py is replaced,
// its utils.py (which its reference imports) stays beside our kbutils.py.
// Written into the run directory itself, not beside it: the worker and
// the judge import each other's modules from the directory they start in,
// and a standby (standby.go) finds the same files there.
func writeJudge(dir string) error {
	files, err := harnessScripts()
	if err != nil {
		return fmt.Errorf("write judge: bundled harness: %w", err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write judge: %w", err)
		}
	}
	return nil
}
