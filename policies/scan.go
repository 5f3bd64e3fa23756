package policies

// The static scanner: patterns in a submission's source that belong to the
// documented ways of faking a fast or correct kernel (timer and harness
// patching, forged results, caches keyed by identity, side streams,
// threads, package installs; ../shared/anchors/evalharness.md §3). It is a
// first line only: the harness and the runner must hold without it, and a
// pattern that also has honest uses flags the submission for an organiser
// instead of refusing it.

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// ScanVerdict is what a finding does to a submission.
type ScanVerdict string

// Verdicts, the stronger last.
const (
	ScanOK     ScanVerdict = ""
	ScanFlag   ScanVerdict = "flag"   // accepted, kept out of the rankings until an organiser clears it
	ScanReject ScanVerdict = "reject" // refused at submission
)

// ScanRule is one pattern family.
type ScanRule struct {
	ID      string
	Verdict ScanVerdict
	Message string // what it means, for the contestant
	// Patterns match one line each (case-sensitive, as code is).
	Patterns []*regexp.Regexp
}

// Finding is one rule matching one line, or with Line 0 one of the
// runner's flags about a run's timings (problems.Flag).
type Finding struct {
	Rule    string      `json:"rule"`
	Verdict ScanVerdict `json:"verdict"`
	Line    int         `json:"line"`
	Text    string      `json:"text"` // the line, trimmed and cut
	Message string      `json:"message"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%s (line %d: %s): %s", f.Rule, f.Line, f.Text, f.Message)
}

func res(patterns ...string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		out[i] = regexp.MustCompile(p)
	}
	return out
}

// ScanRules are the rules, in the order findings are reported.
var ScanRules = []ScanRule{
	{ID: "TIMER_PATCH", Verdict: ScanReject,
		Message: "replaces a timing or synchronisation function; the harness's timers are not to be touched",
		Patterns: res(
			`\b(torch\.cuda\.)?Event\.(elapsed_time|record|synchronize|query|wait)\s*=[^=]`,
			`\btorch\.cuda\.(Event|synchronize|current_stream)\s*=[^=]`,
			`\btime\.(perf_counter|perf_counter_ns|time|time_ns|monotonic|monotonic_ns|process_time)\s*=[^=]`,
			`setattr\(\s*(torch\.cuda|time|torch\.cuda\.Event)\b`,
			`(dlsym|RTLD_NEXT|RTLD_DEFAULT).*\bcu(da)?EventElapsedTime`,
			`\bcu(da)?EventElapsedTime\b.*(dlsym|RTLD_NEXT|RTLD_DEFAULT)`)},
	{ID: "HARNESS_PATCH", Verdict: ScanReject,
		Message: "reaches into the harness or the reference (its input generator, checker or statistics); a kernel uses only its input",
		Patterns: res(
			`^\s*(import|from)\s+(eval|kbutils|reference)\b`,
			`\bsys\.modules\s*\[`,
			`\b__import__\(\s*['"](eval|kbutils|reference)['"]`,
			`\b(check_implementation|generate_input|ref_kernel|calculate_stats|clear_l2_cache)\s*=[^=]`,
			`\btorch\.(allclose|testing\.assert_close|equal)\s*=[^=]`,
			`\btorch\.(randn|rand|randint|randperm|normal|randn_like|rand_like|randint_like|Generator)\s*=[^=]`)},
	{ID: "RESULT_FORGERY", Verdict: ScanReject,
		Message: "writes to the harness's result channel or prints result lines; results come only from the harness",
		Patterns: res(
			`POPCORN_FD`,
			`/proc/self/fd`,
			`\bos\.(write|fdopen|dup2?)\(\s*([3-9]|[1-9][0-9]+)\b`,
			`["'](check|benchmark\.\d+\.(mean|runs|best)|test\.\d+\.status)\s*:\s*`)},
	{ID: "PACKAGE_INSTALL", Verdict: ScanReject,
		Message: "installs packages; the sandbox has no network and a run has what the problem gives it",
		Patterns: res(
			`\bpip\s+install\b`,
			`-m\s+pip\b|['"]pip['"]\s*,\s*['"]install['"]`,
			`\bensurepip\b`)},
	{ID: "EVALUATOR_INSPECTION", Verdict: ScanFlag,
		Message: "inspects the process around it (frames, the garbage collector, arguments, environment); honest kernels do not need to",
		Patterns: res(
			`\bgc\.get_(objects|referrers|referents)\(`,
			`\bsys\._getframe\(`,
			`\binspect\.(stack|currentframe|getouterframes)\(`,
			`\.(f_globals|f_locals|f_back|__code__)\b`,
			`\bsys\.argv\b`,
			`\bos\.environ\b.*POPCORN`)},
	{ID: "IDENTITY_CACHE", Verdict: ScanFlag,
		Message: "caches results keyed by object identity, pointer or call; a kernel must compute every call's output",
		// A subscript or lookup by id() or data_ptr(), not a list of
		// pointers passed to a launch.
		Patterns: res(
			`\w\[[^\]]*(\bid\(|\.data_ptr\(\))[^\]]*\]`,
			`\.(get|setdefault|__contains__)\([^)]*(\bid\(|\.data_ptr\(\))`,
			`(\bid\(|\.data_ptr\(\))[^)]*\)\s+(not\s+)?in\s+\w`)},
	{ID: "SIDE_STREAM", Verdict: ScanFlag,
		Message: "uses CUDA streams; work left on a side stream can escape the timing, so an organiser checks it",
		Patterns: res(
			`\btorch\.cuda\.(Stream|ExternalStream|stream|set_stream)\b`,
			`\b(wait_stream|record_stream)\(`,
			`\bcuda(Stream|StreamCreate|StreamCreateWithFlags|StreamCreateWithPriority)\b`,
			`\bat::cuda::getStreamFromPool\b`)},
	{ID: "THREADS", Verdict: ScanFlag,
		Message: "starts threads or processes, which can work outside the timed call",
		Patterns: res(
			`^\s*(import|from)\s+(threading|_thread|multiprocessing|concurrent\.futures|subprocess)\b`,
			`\bos\.(system|popen|fork|exec[lv]p?e?|spawn[lv]p?e?)\(`,
			`\bstd::(thread|async)\b`,
			`\bpthread_create\b`)},
	{ID: "LAZY_OUTPUT", Verdict: ScanFlag,
		Message: "defines a tensor subclass or dispatch hook, the way lazy results defer work into the untimed check",
		Patterns: res(
			`\bclass\s+\w+\s*\(\s*(torch\.)?Tensor\s*\)`,
			`\b_make_subclass\(`,
			`\b__torch_(function|dispatch)__\b`)},
	{ID: "NATIVE_HOOK", Verdict: ScanFlag,
		Message: "loads native symbols by hand or changes memory protection; harness functions can be detoured that way",
		Patterns: res(
			`^\s*(import\s+ctypes|from\s+ctypes\s+import)\b`,
			`\b(dlsym|dlopen|mprotect|ptrace|process_vm_writev)\s*\(`)},
}

// Scan reports every rule that matches a line of code. Full-line comments
// are skipped (a comment that says "no streams here" is not a stream);
// strings are not, because native code hides in load_inline's strings.
func Scan(code []byte) []Finding {
	var out []Finding
	sc := bufio.NewScanner(bytes.NewReader(code))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "//") {
			continue
		}
		for _, r := range ScanRules {
			for _, p := range r.Patterns {
				if p.MatchString(line) {
					text := trimmed
					if len(text) > 80 {
						text = text[:77] + "..."
					}
					out = append(out, Finding{Rule: r.ID, Verdict: r.Verdict, Line: n, Text: text, Message: r.Message})
					break
				}
			}
		}
	}
	return out
}

// Worst is the strongest verdict among findings.
func Worst(fs []Finding) ScanVerdict {
	v := ScanOK
	for _, f := range fs {
		switch {
		case f.Verdict == ScanReject:
			return ScanReject
		case f.Verdict == ScanFlag:
			v = ScanFlag
		}
	}
	return v
}
