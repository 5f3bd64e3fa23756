package policies

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// FuzzScan: the scanner reads any bytes without panicking, and each
// finding names a rule it has and a line the code has.
func FuzzScan(f *testing.F) {
	f.Add([]byte("import ctypes\nlib = ctypes.CDLL(None)\n"))
	f.Add([]byte("import gc\nfor o in gc.get_objects():\n    pass\n"))
	f.Add([]byte("# import ctypes\ns = torch.cuda.Stream()\n"))
	f.Add(bytes.Repeat([]byte("x"), 70<<10)) // a line over the first buffer
	f.Add([]byte{0xff, 0xfe, 0, '\n', '\r'})
	rules := map[string]bool{}
	for _, r := range ScanRules {
		rules[r.ID] = true
	}
	f.Fuzz(func(t *testing.T, code []byte) {
		lines := bytes.Count(code, []byte("\n")) + 1
		fs := Scan(code)
		if want := naiveRules(code); !slices.Equal(rulesOf(fs), want) {
			t.Errorf("rules %v; every pattern on every line gives %v", rulesOf(fs), want)
		}
		for _, fd := range fs {
			if !rules[fd.Rule] {
				t.Errorf("finding of unknown rule %q", fd.Rule)
			}
			if fd.Line < 1 || fd.Line > lines {
				t.Errorf("finding on line %d of %d", fd.Line, lines)
			}
		}
	})
}

// naiveRules is what the scanner finds without its literal filters: every
// pattern run on every line, in ScanRules' order of first appearance.
func naiveRules(code []byte) []string {
	var out []string
	for _, line := range strings.Split(string(code), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "//") {
			continue
		}
		for _, r := range ScanRules {
			for _, p := range r.Patterns {
				if p.MatchString(line) && !slices.Contains(out, r.ID) {
					out = append(out, r.ID)
				}
			}
		}
	}
	return out
}
