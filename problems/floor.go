package problems

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Floor is a problem's physics floor: how many bytes a benchmark case must
// move and how many operations it must do, as formulas over the case's
// keys (task.yml `floor:`). With a GPU's ceilings it gives the least time
// any correct kernel can take; a time far below it is not a fast kernel
// but a broken timer or a cheat.
type Floor struct {
	Bytes *Expr
	// Reads are the bytes of Bytes a kernel must read from device memory:
	// its inputs, which our judge evicts from L2 before every timed call,
	// so no cache can serve them. Unlike Bytes, which counts writes a
	// call's end may find still in L2 and may count more than a clever
	// kernel moves, they bound a time with no slack (ReadNs).
	Reads *Expr
	FLOPs *Expr
	// Math names the ceiling the operations are measured against: bf16
	// (the default: dense fp16/bf16 tensor cores) or int8/fp8, whose
	// tensor cores are twice as fast.
	Math string
}

// Ceilings are one GPU type's peak rates; zero means unknown.
type Ceilings struct {
	BytesPerSec float64 `json:"bytes_per_s,omitempty" yaml:"bytes_per_s"`
	BF16PerSec  float64 `json:"bf16_flops_per_s,omitempty" yaml:"bf16_flops_per_s"`
	Int8PerSec  float64 `json:"int8_ops_per_s,omitempty" yaml:"int8_ops_per_s"`
	// ReadBytesPerSec is the fastest a kernel can read bytes that L2 does
	// not hold: device memory's peak, or 0 (no read floor) where a cache
	// the judge's L2 flush may not empty could serve them (AMD's Infinity
	// Cache, the CPU's caches).
	ReadBytesPerSec float64 `json:"read_bytes_per_s,omitempty" yaml:"read_bytes_per_s"`
}

// FloorMath lists the values of floor.math.
var FloorMath = []string{"bf16", "int8", "fp8"}

// Ns is the floor of one case in nanoseconds, or 0 when the ceilings or the
// formulas do not give one.
func (f *Floor) Ns(c Case, ce Ceilings) (float64, error) {
	if f == nil {
		return 0, nil
	}
	vars := caseNumbers(c)
	best := 0.0
	if f.Bytes != nil && ce.BytesPerSec > 0 {
		b, err := f.Bytes.Eval(vars)
		if err != nil {
			return 0, fmt.Errorf("floor.bytes for %s: %w", c, err)
		}
		best = math.Max(best, b/ce.BytesPerSec*1e9)
	}
	rate := ce.BF16PerSec
	if f.Math == "int8" || f.Math == "fp8" {
		rate = ce.Int8PerSec
	}
	if f.FLOPs != nil && rate > 0 {
		ops, err := f.FLOPs.Eval(vars)
		if err != nil {
			return 0, fmt.Errorf("floor.flops for %s: %w", c, err)
		}
		best = math.Max(best, ops/rate*1e9)
	}
	return best, nil
}

// ReadNs is the read floor of one case in nanoseconds: its reads at the
// ceilings' read bandwidth, or 0 when either is missing. It is a hard
// bound, held to with no slack: inputs evicted from L2 come from device
// memory, at no more than its peak, within the timed call.
func (f *Floor) ReadNs(c Case, ce Ceilings) (float64, error) {
	if f == nil || f.Reads == nil || ce.ReadBytesPerSec <= 0 {
		return 0, nil
	}
	b, err := f.Reads.Eval(caseNumbers(c))
	if err != nil {
		return 0, fmt.Errorf("floor.reads for %s: %w", c, err)
	}
	return b / ce.ReadBytesPerSec * 1e9, nil
}

func caseNumbers(c Case) map[string]float64 {
	vars := map[string]float64{}
	for _, k := range c.Keys {
		if v, err := strconv.ParseFloat(c.Values[k], 64); err == nil {
			vars[k] = v
		}
	}
	return vars
}

func parseFloor(c *collector, n *yaml.Node) *Floor {
	f := &Floor{Math: "bf16"}
	for _, kv := range pairs(c, "floor", n) {
		k, v := kv[0], kv[1]
		field := "floor." + k.Value
		switch k.Value {
		case "bytes", "reads", "flops":
			s, ok := scalarString(c, field, v)
			if !ok {
				continue
			}
			e, err := ParseExpr(s)
			if err != nil {
				c.add(v.Line, field, "%v", err)
				continue
			}
			e.line = v.Line
			switch k.Value {
			case "bytes":
				f.Bytes = e
			case "reads":
				f.Reads = e
			default:
				f.FLOPs = e
			}
		case "math":
			if s, ok := scalarString(c, field, v); ok {
				if !slices.Contains(FloorMath, s) {
					c.add(v.Line, field, "must be one of %s, got %q", strings.Join(FloorMath, ", "), s)
				}
				f.Math = s
			}
		default:
			c.add(k.Line, field, "unknown key; a floor has bytes, reads, flops and math")
		}
	}
	if f.Bytes == nil && f.Reads == nil && f.FLOPs == nil {
		c.add(n.Line, "floor", "needs bytes, reads or flops")
	}
	return f
}

// validateFloor evaluates the formulas on every benchmark case, so that a
// name the cases lack or a negative count is an error when the problem
// loads, not when a ranked run ends. Reads above bytes are an error too:
// the bytes read are among those moved, and a read floor is applied with
// no slack, so a count too high flags honest kernels.
func validateFloor(c *collector, t *Task) {
	if t.Floor == nil {
		return
	}
	for _, set := range []struct {
		field string
		cases []Case
	}{{"benchmarks", t.Benchmarks}, {"cpu_benchmarks", t.CPUBenchmarks}} {
		for i, cs := range set.cases {
			vars := caseNumbers(cs)
			counts := map[string]float64{}
			for _, e := range []struct {
				name string
				expr *Expr
			}{{"floor.bytes", t.Floor.Bytes}, {"floor.reads", t.Floor.Reads}, {"floor.flops", t.Floor.FLOPs}} {
				if e.expr == nil {
					continue
				}
				v, err := e.expr.Eval(vars)
				if err == nil && (v < 0 || math.IsInf(v, 0) || math.IsNaN(v)) {
					err = fmt.Errorf("is %g, not a count", v)
				}
				if err != nil {
					c.add(e.expr.line, e.name, "on %s[%d] (%s): %v", set.field, i, cs, err)
					continue
				}
				counts[e.name] = v
			}
			reads, okR := counts["floor.reads"]
			bytes, okB := counts["floor.bytes"]
			if okR && okB && reads > bytes {
				c.add(t.Floor.Reads.line, "floor.reads", "on %s[%d] (%s): %g is more than floor.bytes, %g; the bytes read are among those moved",
					set.field, i, cs, reads, bytes)
			}
		}
	}
}

// applyFloor sets each benchmark's MinNs from the task's floor and the device's
// ceilings, and notes the means below it: the larger of slack × the floor
// and the read floor, which has no slack (Floor.ReadNs).
func applyFloor(t *Task, opts EvalOptions, rep *Report) error {
	if t.Floor == nil || opts.Ceilings == nil {
		return nil
	}
	slack := opts.FloorSlack
	if slack <= 0 {
		slack = DefaultFloorSlack
	}
	ce := *opts.Ceilings
	if !flushesInputs(t, opts.Device) {
		ce.ReadBytesPerSec = 0
	}
	cases := t.BenchmarksFor(opts.Device)
	for i := range rep.Benchmarks {
		b := &rep.Benchmarks[i]
		// The message names the task's case, not b.Spec: a private run's
		// spec carries the seed mixed with the secret.
		if b.Index < 0 || b.Index >= len(cases) {
			continue
		}
		ns, err := t.Floor.Ns(cases[b.Index], ce)
		if err != nil {
			return err
		}
		reads, err := t.Floor.ReadNs(cases[b.Index], ce)
		if err != nil {
			return err
		}
		b.MinNs = max(ns*slack, reads)
		if b.MinNs <= 0 || b.Runs == 0 || b.Mean >= b.MinNs {
			continue
		}
		msg := fmt.Sprintf("%.0f %% of the least time this device's peak bandwidth and throughput allow (%s)", slack*100, FormatNS(ns))
		if reads >= ns*slack {
			msg = "the least time in which this device's memory can deliver the inputs at its peak bandwidth, with no slack: the read floor"
		}
		rep.Flags = append(rep.Flags, Flag{Rule: FlagPhysicsFloor, Message: fmt.Sprintf("benchmark %d (%s): mean %s is under %s, %s",
			b.Index, cases[b.Index], FormatNS(b.Mean), FormatNS(b.MinNs), msg)})
	}
	return nil
}

// flushesInputs says whether a run of t on device reads every case's
// inputs from device memory: our judge times it on a GPU, evicting L2 and
// resetting persisting lines before each timed call. The CPU judge flushes
// no cache (a case's inputs, cloned just before the call, may sit in it),
// and a problem's own harness may flush nothing.
func flushesInputs(t *Task, device string) bool {
	return device != "cpu" && t.Lang == LangPython && t.TimedBy() == TimedByJudge
}

// Expr is a parsed arithmetic formula: numbers, case keys, + - * / **,
// parentheses and min, max, ceil, floor.
type Expr struct {
	src  string
	root node
	line int
}

func (e *Expr) String() string { return e.src }

// Eval computes the formula with the given values of names.
func (e *Expr) Eval(vars map[string]float64) (float64, error) { return e.root.eval(vars) }

type node interface {
	eval(vars map[string]float64) (float64, error)
}

type num float64
type name string
type unary struct{ x node }
type binary struct {
	op   string
	l, r node
}
type call struct {
	fn   string
	args []node
}

func (n num) eval(map[string]float64) (float64, error) { return float64(n), nil }

func (n name) eval(vars map[string]float64) (float64, error) {
	v, ok := vars[string(n)]
	if !ok {
		return 0, fmt.Errorf("the case has no number %q", string(n))
	}
	return v, nil
}

func (u unary) eval(vars map[string]float64) (float64, error) {
	v, err := u.x.eval(vars)
	return -v, err
}

func (b binary) eval(vars map[string]float64) (float64, error) {
	l, err := b.l.eval(vars)
	if err != nil {
		return 0, err
	}
	r, err := b.r.eval(vars)
	if err != nil {
		return 0, err
	}
	switch b.op {
	case "+":
		return l + r, nil
	case "-":
		return l - r, nil
	case "*":
		return l * r, nil
	case "/":
		if r == 0 {
			return 0, errors.New("division by zero")
		}
		return l / r, nil
	}
	return math.Pow(l, r), nil
}

var exprFuncs = map[string]func([]float64) float64{
	"min":   func(a []float64) float64 { return slices.Min(a) },
	"max":   func(a []float64) float64 { return slices.Max(a) },
	"ceil":  func(a []float64) float64 { return math.Ceil(a[0]) },
	"floor": func(a []float64) float64 { return math.Floor(a[0]) },
}

func (c call) eval(vars map[string]float64) (float64, error) {
	args := make([]float64, len(c.args))
	for i, a := range c.args {
		v, err := a.eval(vars)
		if err != nil {
			return 0, err
		}
		args[i] = v
	}
	return exprFuncs[c.fn](args), nil
}

// ParseExpr parses a formula; the error names what is wrong and where.
func ParseExpr(src string) (*Expr, error) {
	p := &exprParser{src: src}
	p.next()
	root, err := p.sum()
	if err == nil && p.tok != "" {
		err = p.fail("unexpected %q", p.tok)
	}
	if err != nil {
		return nil, fmt.Errorf("formula %q: %w", src, err)
	}
	return &Expr{src: src, root: root}, nil
}

type exprParser struct {
	src string
	pos int    // where the next token starts
	tok string // the current token, "" at the end
	at  int    // where the current token starts
}

func (p *exprParser) fail(format string, args ...any) error {
	return fmt.Errorf("at column %d: %s", p.at+1, fmt.Sprintf(format, args...))
}

func (p *exprParser) next() {
	for p.pos < len(p.src) && p.src[p.pos] == ' ' {
		p.pos++
	}
	p.at = p.pos
	if p.pos >= len(p.src) {
		p.tok = ""
		return
	}
	s := p.src[p.pos:]
	r := rune(s[0])
	n := 1
	switch {
	case strings.HasPrefix(s, "**"):
		n = 2
	case unicode.IsDigit(r) || r == '.':
		for n < len(s) && (unicode.IsDigit(rune(s[n])) || s[n] == '.' || s[n] == 'e' || s[n] == 'E' ||
			((s[n] == '+' || s[n] == '-') && (s[n-1] == 'e' || s[n-1] == 'E'))) {
			n++
		}
	case unicode.IsLetter(r) || r == '_':
		for n < len(s) && (unicode.IsLetter(rune(s[n])) || unicode.IsDigit(rune(s[n])) || s[n] == '_') {
			n++
		}
	}
	p.tok = s[:n]
	p.pos += n
}

func (p *exprParser) sum() (node, error) {
	l, err := p.product()
	for err == nil && (p.tok == "+" || p.tok == "-") {
		op := p.tok
		p.next()
		var r node
		if r, err = p.product(); err == nil {
			l = binary{op, l, r}
		}
	}
	return l, err
}

func (p *exprParser) product() (node, error) {
	l, err := p.power()
	for err == nil && (p.tok == "*" || p.tok == "/") {
		op := p.tok
		p.next()
		var r node
		if r, err = p.power(); err == nil {
			l = binary{op, l, r}
		}
	}
	return l, err
}

func (p *exprParser) power() (node, error) {
	if p.tok == "-" {
		p.next()
		x, err := p.power()
		return unary{x}, err
	}
	base, err := p.primary()
	if err != nil || p.tok != "**" {
		return base, err
	}
	p.next()
	exp, err := p.power() // right-associative, as in Python
	return binary{"**", base, exp}, err
}

func (p *exprParser) primary() (node, error) {
	tok := p.tok
	switch {
	case tok == "":
		return nil, p.fail("the formula ends too soon")
	case tok == "(":
		p.next()
		x, err := p.sum()
		if err != nil {
			return nil, err
		}
		if p.tok != ")" {
			return nil, p.fail("expected ), got %q", p.tok)
		}
		p.next()
		return x, nil
	case unicode.IsDigit(rune(tok[0])) || tok[0] == '.':
		v, err := strconv.ParseFloat(tok, 64)
		if err != nil {
			return nil, p.fail("%q is not a number", tok)
		}
		p.next()
		return num(v), nil
	case unicode.IsLetter(rune(tok[0])) || tok[0] == '_':
		p.next()
		if p.tok != "(" {
			return name(tok), nil
		}
		if exprFuncs[tok] == nil {
			return nil, p.fail("unknown function %q; use min, max, ceil or floor", tok)
		}
		p.next()
		var args []node
		for {
			a, err := p.sum()
			if err != nil {
				return nil, err
			}
			args = append(args, a)
			if p.tok == ")" {
				break
			}
			if p.tok != "," {
				return nil, p.fail("expected , or ), got %q", p.tok)
			}
			p.next()
		}
		p.next()
		if (tok == "ceil" || tok == "floor") && len(args) != 1 {
			return nil, p.fail("%s takes one argument, got %d", tok, len(args))
		}
		return call{tok, args}, nil
	}
	return nil, p.fail("unexpected %q", tok)
}
