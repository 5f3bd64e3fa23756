package problems

import (
	"bytes"
	"strconv"
	"strings"
)

// maxProgressTests bounds the tests one phase reports live: the stream is
// untrusted, and every report becomes an event the daemon stores.
const maxProgressTests = 500

// testProgress reads a result stream as the harness writes it and reports
// each test when its status line arrives, parsing lines the way
// ParseResult does. It reads at most budget bytes, never fails, and keeps
// at most one line (bounded) between writes.
type testProgress struct {
	fn      func(TestResult)
	budget  int
	line    []byte
	res     Result
	tests   map[int]*TestResult
	benches map[int]*BenchmarkResult
	sent    int
}

func newTestProgress(budget int, fn func(TestResult)) *testProgress {
	return &testProgress{fn: fn, budget: budget, tests: map[int]*TestResult{}, benches: map[int]*BenchmarkResult{}}
}

func (p *testProgress) Write(b []byte) (int, error) {
	n := len(b)
	if p.budget <= 0 {
		return n, nil
	}
	b = b[:min(len(b), p.budget)]
	p.budget -= len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(p.line)+len(b) <= maxResultLine {
				p.line = append(p.line, b...)
			}
			break
		}
		if len(p.line)+i <= maxResultLine {
			p.line = append(p.line, b[:i]...)
			p.handle(string(p.line))
		}
		p.line = p.line[:0]
		b = b[i+1:]
	}
	return n, nil
}

func (p *testProgress) handle(line string) {
	key, value, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
	if !ok {
		return
	}
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	if p.res.set(p.tests, p.benches, key, value) != nil {
		return
	}
	idx, ok := strings.CutPrefix(key, "test.")
	if !ok || !strings.HasSuffix(idx, ".status") || p.sent >= maxProgressTests {
		return
	}
	i, err := strconv.Atoi(strings.TrimSuffix(idx, ".status"))
	if t := p.tests[i]; err == nil && t != nil {
		p.sent++
		p.fn(*t)
	}
}
