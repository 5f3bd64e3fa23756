package problems

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Case is one test or benchmark: flat key/value arguments for the problem's
// generate_input, in the order the author wrote them.
type Case struct {
	Keys   []string
	Values map[string]string
}

// NewCase builds a case from alternating keys and values; it is a
// convenience for tests and generated cases.
func NewCase(kv ...string) Case {
	c := Case{Values: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Set(kv[i], kv[i+1])
	}
	return c
}

// Set adds or replaces a key, keeping the position of an existing one.
func (c *Case) Set(k, v string) {
	if c.Values == nil {
		c.Values = map[string]string{}
	}
	if _, ok := c.Values[k]; !ok {
		c.Keys = append(c.Keys, k)
	}
	c.Values[k] = v
}

// Get returns a value and whether the key is present.
func (c Case) Get(k string) (string, bool) {
	v, ok := c.Values[k]
	return v, ok
}

// String renders the case as one line of the cases file: "k: v; k: v".
func (c Case) String() string {
	parts := make([]string, len(c.Keys))
	for i, k := range c.Keys {
		parts[i] = k + ": " + c.Values[k]
	}
	return strings.Join(parts, "; ")
}

var (
	caseKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// Values are what every known harness regex can read back: integers,
	// booleans, decimals and identifier-like words. Anything with the
	// separators ':' ';' or whitespace would not survive the line format.
	caseValueRE = regexp.MustCompile(`^[A-Za-z0-9_.+\-]+$`)
)

func checkCaseKey(k string) error {
	if !caseKeyRE.MatchString(k) {
		return fmt.Errorf("key %q must be an identifier (letters, digits, _)", k)
	}
	return nil
}

func checkCaseValue(v string) error {
	if inner, ok := strings.CutPrefix(v, "["); ok && strings.HasSuffix(inner, "]") {
		inner = strings.TrimSuffix(inner, "]")
		if strings.TrimSpace(inner) == "" {
			return nil
		}
		for _, it := range strings.Split(inner, ",") {
			if !caseValueRE.MatchString(strings.TrimSpace(it)) {
				return fmt.Errorf("list %q must hold numbers, true/false or words of letters, digits, _ . + -", v)
			}
		}
		return nil
	}
	if !caseValueRE.MatchString(v) {
		return fmt.Errorf("value %q must be a number, true/false or a word of letters, digits, _ . + -", v)
	}
	return nil
}

// FormatCases writes the cases file the harness reads: one case per line.
func FormatCases(cases []Case) string {
	var b strings.Builder
	for _, c := range cases {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// maxCases bounds ParseCases so a hostile file cannot make it allocate
// without limit.
const maxCases = 100000

// ParseCases reads a cases file back. Blank lines are skipped.
func ParseCases(r io.Reader) ([]Case, error) {
	var out []Case
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		if len(out) >= maxCases {
			return nil, fmt.Errorf("cases line %d: more than %d cases", line, maxCases)
		}
		c := Case{Values: map[string]string{}}
		for _, part := range strings.Split(text, ";") {
			k, v, ok := strings.Cut(part, ":")
			if !ok {
				return nil, fmt.Errorf("cases line %d: %q is not key: value", line, strings.TrimSpace(part))
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if err := checkCaseKey(k); err != nil {
				return nil, fmt.Errorf("cases line %d: %w", line, err)
			}
			if err := checkCaseValue(v); err != nil {
				return nil, fmt.Errorf("cases line %d: %w", line, err)
			}
			if _, dup := c.Values[k]; dup {
				return nil, fmt.Errorf("cases line %d: key %q appears twice", line, k)
			}
			c.Set(k, v)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read cases: %w", err)
	}
	return out, nil
}
