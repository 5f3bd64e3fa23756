package problems

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Profiler wraps profile mode's harness in Nsight Compute. The harness
// marks the contestant's call with the NVTX range NVTXRange, so only the
// kernels it launches are profiled, not the reference's or the warm-up's.
type Profiler struct {
	// NCU is the ncu command as the launched process sees it.
	NCU string
	// MaxKernels caps the kernels profiled (ncu --launch-count); each one
	// is replayed once per pass, so this bounds the run's time.
	MaxKernels int
	// Sections are ncu's section identifiers; DefaultNCUSections if nil.
	Sections []string
	// ClockControl is ncu's --clock-control: "" leaves ncu's default (it
	// locks the base clock while profiling); "none" keeps the clocks the
	// box locked, which ncu would otherwise reset when it finishes.
	ClockControl string
}

// ncuImportTimeout bounds the second launch, which prints the report.
const ncuImportTimeout = 2 * time.Minute

// ProfileFile is the report ncu writes into the work directory.
const ProfileFile = "profile.ncu-rep"

// NVTXRange is the range the harness pushes around the contestant's call.
const NVTXRange = "custom_kernel"

// DefaultNCUSections are the sections a contestant reads first: how close
// to the roofs the kernel runs, how full the SMs are, where memory traffic
// goes and why warps stall.
var DefaultNCUSections = []string{"SpeedOfLight", "LaunchStats", "Occupancy", "MemoryWorkloadAnalysis",
	"ComputeWorkloadAnalysis", "WarpStateStats"}

// ProfileResult is what profile mode made with ncu.
type ProfileResult struct {
	Tool    string `json:"tool"`              // "ncu"
	Kernels int    `json:"kernels"`           // kernels in the report
	Summary string `json:"summary,omitempty"` // the key sections as text
	// File is the report's path on the host while the evaluation's work
	// directory lives; whoever keeps it must copy it out.
	File string `json:"-"`
	Size int64  `json:"size,omitempty"`
}

// recordArgv is the harness's argv under ncu.
// A native harness marks no range, so its first kernels are profiled.
func (p *Profiler) recordArgv(entry []string, nvtx bool) []string {
	n := p.MaxKernels
	if n <= 0 {
		n = 10
	}
	argv := []string{p.NCU, "--target-processes", "all"}
	if nvtx {
		argv = append(argv, "--nvtx", "--nvtx-include", NVTXRange+"/")
	}
	argv = append(argv, "--launch-count", strconv.Itoa(n))
	if p.ClockControl != "" {
		argv = append(argv, "--clock-control", p.ClockControl)
	}
	secs := p.Sections
	if secs == nil {
		secs = DefaultNCUSections
	}
	for _, s := range secs {
		argv = append(argv, "--section", s)
	}
	argv = append(argv, "--export", strings.TrimSuffix(ProfileFile, ".ncu-rep"), "--force-overwrite")
	return append(argv, entry...)
}

// summarize prints the report's key metrics in a second launch (ncu
// parses a file the contestant's code could have written, so it runs where
// the harness ran).
func (p *Profiler) summarize(ctx context.Context, l Launcher, dir string, env []string, limit int) (*ProfileResult, error) {
	st, err := os.Lstat(filepath.Join(dir, ProfileFile))
	if errors.Is(err, os.ErrNotExist) {
		return &ProfileResult{Tool: "ncu", Summary: "ncu profiled no kernel: none ran inside the " + NVTXRange + " range"}, nil
	}
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", ProfileFile)
	}
	out, err := l.Launch(ctx, Launch{Dir: dir, Argv: []string{p.NCU, "--import", ProfileFile, "--csv", "--page", "details"},
		Env: env, Timeout: ncuImportTimeout, OutputLimit: limit})
	if err != nil {
		return nil, fmt.Errorf("ncu --import: %w", err)
	}
	res := &ProfileResult{Tool: "ncu", File: filepath.Join(dir, ProfileFile), Size: st.Size()}
	if out.ExitCode != 0 || out.TimedOut {
		res.Summary = fmt.Sprintf("ncu could not read its report (exit %d): %s", out.ExitCode, lastLines(string(out.Stderr)+string(out.Stdout), 5))
		return res, nil
	}
	kernels, err := ParseNCUDetails(bytes.NewReader(out.Stdout))
	if err != nil {
		res.Summary = "ncu's details page could not be read: " + err.Error()
		return res, nil
	}
	res.Kernels = len(kernels)
	res.Summary = SummarizeNCU(kernels)
	if out.Truncated {
		res.Summary += "\n(ncu's details were cut at the output limit; download the report for the rest)\n"
	}
	return res, nil
}

// NCUKernel is one profiled kernel of ncu's details page.
type NCUKernel struct {
	ID    string
	Name  string
	Grid  string
	Block string
	// Metrics maps "section/metric" to the value with its unit.
	Metrics map[string]string
	// Hints are ncu's optimisation advice (its OPT rules).
	Hints []NCUHint
}

// NCUHint is one of ncu's rules that found something to improve.
type NCUHint struct {
	Rule    string
	Speedup float64 // ncu's estimate, in percent; 0 when it gives none
	Text    string
}

// ParseNCUDetails reads `ncu --import R --csv --page details`: one row per
// metric, with the kernel's identity repeated in each. Columns are found
// by name, so versions that add columns still parse.
func ParseNCUDetails(r io.Reader) ([]NCUKernel, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	// ncu may print ==PROF== or ==WARNING== lines before the table.
	if i := bytes.Index(data, []byte(`"ID",`)); i > 0 {
		data = data[i:]
	} else if i < 0 {
		return nil, errors.New("no table in ncu's output")
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("ncu table header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	for _, need := range []string{"ID", "Kernel Name", "Section Name", "Metric Name", "Metric Value"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("ncu table has no %q column", need)
		}
	}
	get := func(rec []string, name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return rec[i]
		}
		return ""
	}
	var out []NCUKernel
	index := map[string]int{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("ncu table: %w", err)
		}
		id := get(rec, "ID")
		k, ok := index[id]
		if !ok {
			k = len(out)
			index[id] = k
			out = append(out, NCUKernel{ID: id, Name: get(rec, "Kernel Name"), Grid: get(rec, "Grid Size"),
				Block: get(rec, "Block Size"), Metrics: map[string]string{}})
		}
		if rule := get(rec, "Rule Name"); rule != "" && get(rec, "Metric Name") == "" {
			// A rule's row: keep the advice, not the notes and warnings.
			if get(rec, "Rule Type") == "OPT" {
				sp, _ := strconv.ParseFloat(get(rec, "Estimated Speedup"), 64)
				out[k].Hints = append(out[k].Hints, NCUHint{Rule: rule, Speedup: sp, Text: get(rec, "Rule Description")})
			}
			continue
		}
		key := get(rec, "Section Name") + "/" + get(rec, "Metric Name")
		val := get(rec, "Metric Value")
		if u := shortUnit(get(rec, "Metric Unit")); u != "" {
			val += " " + u
		}
		out[k].Metrics[key] = val
	}
	return out, nil
}

// summaryLines pick, per line of the summary, the metrics worth reading
// first, by the names ncu's sections give them.
var summaryLines = []struct {
	label   string
	section string
	metrics [][2]string // metric name, label
}{
	{"throughput", "GPU Speed Of Light Throughput", [][2]string{{"Duration", "time"}, {"Compute (SM) Throughput", "SM"},
		{"Memory Throughput", "memory"}, {"DRAM Throughput", "DRAM"}, {"L1/TEX Cache Throughput", "L1"}, {"L2 Cache Throughput", "L2"},
		{"SM Frequency", "SM clock"}}},
	{"launch", "Launch Statistics", [][2]string{{"Registers Per Thread", "registers/thread"},
		{"Dynamic Shared Memory Per Block", "dynamic smem/block"}, {"Static Shared Memory Per Block", "static smem/block"}, {"Waves Per SM", "waves/SM"}}},
	{"occupancy", "Occupancy", [][2]string{{"Achieved Occupancy", "achieved"}, {"Theoretical Occupancy", "theoretical"},
		{"Achieved Active Warps Per SM", "warps/SM"}}},
	{"memory", "Memory Workload Analysis", [][2]string{{"Memory Throughput", "bandwidth"}, {"Mem Busy", "busy"},
		{"Max Bandwidth", "max bandwidth"}, {"L1/TEX Hit Rate", "L1 hit"}, {"L2 Hit Rate", "L2 hit"}}},
	{"compute", "Compute Workload Analysis", [][2]string{{"Executed Ipc Active", "IPC"}, {"SM Busy", "SM busy"}, {"Issue Slots Busy", "issue slots busy"}}},
	{"warp state", "Warp State Statistics", [][2]string{{"Warp Cycles Per Issued Instruction", "cycles/issued instruction"},
		{"Avg. Active Threads Per Warp", "active threads/warp"}}},
}

// SummarizeNCU prints each kernel's key metrics, a few lines per kernel.
func SummarizeNCU(kernels []NCUKernel) string {
	if len(kernels) == 0 {
		return "ncu profiled no kernel: none ran inside the " + NVTXRange + " range\n"
	}
	var b strings.Builder
	for i, k := range kernels {
		name := k.Name
		if len(name) > 100 {
			name = name[:97] + "..."
		}
		fmt.Fprintf(&b, "kernel %d: %s", i+1, name)
		if k.Grid != "" || k.Block != "" {
			fmt.Fprintf(&b, "  grid %s block %s", k.Grid, k.Block)
		}
		b.WriteString("\n")
		for _, line := range summaryLines {
			var parts []string
			for _, m := range line.metrics {
				if v, ok := k.Metrics[line.section+"/"+m[0]]; ok {
					parts = append(parts, m[1]+" "+v)
				}
			}
			if len(parts) > 0 {
				fmt.Fprintf(&b, "  %-11s %s\n", line.label, strings.Join(parts, ", "))
			}
		}
		hints := slices.Clone(k.Hints)
		slices.SortStableFunc(hints, func(x, y NCUHint) int { return cmp.Compare(y.Speedup, x.Speedup) })
		for _, h := range hints[:min(len(hints), 2)] {
			text := h.Text
			if i := strings.Index(text, ". "); i > 0 {
				text = text[:i+1] // the first sentence says what; the report has the rest
			}
			if len(text) > 200 {
				text = text[:197] + "..."
			}
			est := ""
			if h.Speedup > 0 {
				est = fmt.Sprintf(", est. speedup %.0f %%", h.Speedup)
			}
			fmt.Fprintf(&b, "  %-11s %s%s: %s\n", "hint", h.Rule, est, text)
		}
	}
	return b.String()
}

// shortUnit writes ncu's unit names the way people do, and drops those
// the summary's labels already carry.
func shortUnit(u string) string {
	switch u {
	case "register/thread", "warp", "cycle", "inst/cycle":
		return ""
	case "nsecond":
		return "ns"
	case "usecond":
		return "us"
	case "msecond":
		return "ms"
	case "second":
		return "s"
	}
	r := strings.NewReplacer("Tbyte", "TB", "Gbyte", "GB", "Mbyte", "MB", "Kbyte", "KB", "byte", "B", "/second", "/s", "hz", "Hz")
	u = r.Replace(u)
	return strings.TrimSuffix(u, "/block") // every per-block figure is labelled so
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
