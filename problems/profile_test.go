package problems_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kernelbox/internal/testutil"
	"kernelbox/problems"
)

// TestProfile_UnderNCU runs the real harness in profile mode under a
// stand-in ncu (testdata/fakencu; the real one is TestProfile_NCUOnGPU's,
// on the GPU machine): the harness is wrapped with the NVTX filter
// and the kernel cap, the report is kept, and its details page becomes the
// summary.
func TestProfile_UnderNCU(t *testing.T) {
	t.Parallel()
	it := testutil.RequireTorch(t)
	task, err := problems.LoadTask(filepath.Join("library", "vectoradd"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("library", "vectoradd", "solutions", "correct", "chunked_add.py"))
	if err != nil {
		t.Fatal(err)
	}
	ncu, err := filepath.Abs(filepath.Join("testdata", "fakencu", "ncu"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	rep, err := problems.Evaluate(t.Context(), problems.ExecLauncher{}, task, problems.EvalOptions{
		Mode: problems.ModeProfile, Python: it.Path, Device: it.Device, Env: os.Environ(), WorkDir: work, Submission: src,
		Profiler: &problems.Profiler{NCU: ncu, MaxKernels: 3, Sections: []string{"SpeedOfLight", "Occupancy"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || rep.Profile == nil {
		t.Fatalf("profile under ncu: passed %v, profile %+v (%s)", rep.Passed, rep.Profile, rep.Reason)
	}
	for _, b := range rep.Benchmarks {
		if r := decode(t, b.Report); !strings.Contains(r, "profiled by ncu") {
			t.Errorf("bench %d says %q, want that ncu profiled it", b.Index, r)
		}
	}
	saved, err := os.ReadFile(rep.Profile.File)
	if err != nil {
		t.Fatalf("the report was not kept: %v", err)
	}
	want := "--target-processes all --nvtx --nvtx-include custom_kernel/ --launch-count 3 --section SpeedOfLight --section Occupancy --force-overwrite"
	if !strings.Contains(string(saved), want) {
		t.Errorf("ncu ran with %q, want %q", saved, want)
	}
	if rep.Profile.Kernels != 3 || rep.Profile.Size != int64(len(saved)) {
		t.Errorf("profile = %+v, want 3 kernels and the report's size %d", rep.Profile, len(saved))
	}
	// details.csv is the real ncu 2025.3.1's page for vectoradd's Triton
	// template on the H200 (docs/history/gpu-runs.md).
	for _, s := range []string{"kernel 1: add_kernel  grid (16384, 1, 1) block (128, 1, 1)\n",
		"  throughput  time 23.42 us, SM 14.41 %, memory 75.60 %, DRAM 75.60 %, L1 31.48 %, L2 87.65 %, SM clock 1.49 GHz\n",
		"  launch      registers/thread 20, dynamic smem/block 0 B, static smem/block 0 B, waves/SM 7.76\n",
		"  occupancy   achieved 82.93 %, theoretical 100 %, warps/SM 53.08\n",
		"  memory      bandwidth 3.64 TB/s, busy 57.22 %, max bandwidth 75.60 %, L1 hit 0 %, L2 hit 34.51 %\n",
		"  warp state  cycles/issued instruction 122.96, active threads/warp 32\n",
		"  hint        HighPipeUtilization, est. speedup 94 %: All compute pipelines are under-utilized.\n",
		"kernel 3: add_kernel  grid (65536, 1, 1) block (128, 1, 1)\n"} {
		if !strings.Contains(rep.Profile.Summary, s) {
			t.Errorf("summary lacks %q:\n%s", s, rep.Profile.Summary)
		}
	}

	// Without a profiler the harness prints PyTorch's table instead.
	rep = evalFile(t, filepath.Join("library", "vectoradd"), problems.ModeProfile,
		filepath.Join("library", "vectoradd", "solutions", "correct", "chunked_add.py"), nil)
	if !rep.Passed || rep.Profile != nil || len(rep.Benchmarks) == 0 || !strings.Contains(decode(t, rep.Benchmarks[0].Report), "Self CPU") {
		t.Errorf("profile without ncu: passed %v, profile %+v, benchmarks %+v", rep.Passed, rep.Profile, rep.Benchmarks)
	}
}

func TestParseNCUDetails_Malformed(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"empty":          "",
		"no table":       "==ERROR== The application returned an error code (1).\n",
		"missing column": `"ID","Kernel Name","Metric Name"` + "\n" + `"0","k","Duration"` + "\n",
		"broken quoting": `"ID","Kernel Name","Section Name","Metric Name","Metric Value"` + "\n" + `"0","k","S","M","1` + "\n",
	} {
		if ks, err := problems.ParseNCUDetails(strings.NewReader(in)); err == nil {
			t.Errorf("%s: parsed as %+v, want an error", name, ks)
		}
	}
	ks, err := problems.ParseNCUDetails(strings.NewReader(`"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name"` + "\n" +
		`"0","k","GPU Speed Of Light Throughput","Duration","nsecond","950","x"` + "\n"))
	if err != nil || len(ks) != 1 || ks[0].Metrics["GPU Speed Of Light Throughput/Duration"] != "950 ns" {
		t.Errorf("a table with an extra column = %+v, %v", ks, err)
	}
	if s := problems.SummarizeNCU(nil); !strings.Contains(s, "no kernel") {
		t.Errorf("summary of nothing = %q", s)
	}
}

func decode(t *testing.T, report string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(report)
	if err != nil {
		t.Fatalf("report %q is not base64: %v", report, err)
	}
	return string(b)
}
