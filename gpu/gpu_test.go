package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernelbox/gpu"
	"kernelbox/gpu/gputest"
)

func TestDiscover_NVIDIA(t *testing.T) {
	t.Parallel()
	fake := &gputest.NVML{Driver: "580.159.04", GPUs: []gputest.GPU{
		{Name: "NVIDIA H200", UUID: "GPU-aaaa", Minor: 0, Memory: 150 << 30, PCI: "00000000:00:06.0", NUMA: -1},
		{Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-bbbb", Minor: 1, Memory: 80 << 30, PCI: "00000000:00:07.0", NUMA: 1},
	}}
	inv := gpu.Discover(t.Context(), gpu.Options{NVML: fake, Root: "testdata/nvidia", Aliases: map[string]string{"H100": "H100-SXM"}})
	if inv.Vendor != gpu.VendorNVIDIA || inv.Driver != "580.159.04" || len(inv.GPUs) != 2 {
		t.Fatalf("Discover = %+v, want 2 NVIDIA GPUs on driver 580.159.04", inv)
	}
	if fake.Inits != fake.Downs {
		t.Errorf("NVML Init %d times, Shutdown %d times", fake.Inits, fake.Downs)
	}
	want := gpu.GPU{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Type: "H200", Vendor: gpu.VendorNVIDIA, Memory: 150 << 30,
		PCI: "0000:00:06.0", NUMANode: 0, CPUs: "0-7", // NVML had no NUMA node: sysfs's
		Nodes: []gpu.Node{{Path: "/dev/nvidia0", Type: 'c', Major: 195, Minor: 0}, {Path: "/dev/nvidiactl", Type: 'c', Major: 195, Minor: 255},
			{Path: "/dev/nvidia-uvm", Type: 'c', Major: 509, Minor: 0}}, // not created yet: its major from /proc/devices
		ProfilingNodes: []gpu.Node{{Path: "/dev/nvidia-uvm-tools", Type: 'c', Major: 509, Minor: 1}},
		ProcDir:        "/proc/driver/nvidia/gpus/0000:00:06.0",
		VisibleEnv:     []string{"CUDA_VISIBLE_DEVICES=GPU-aaaa", "CUDA_DEVICE_ORDER=PCI_BUS_ID"},
	}
	if diff := cmp.Diff(want, inv.GPUs[0]); diff != "" {
		t.Errorf("GPU 0 (-want +got):\n%s", diff)
	}
	if g := inv.GPUs[1]; g.Type != "H100-SXM" || g.NUMANode != 1 || g.CPUs != "8-15" || g.Nodes[0].Path != "/dev/nvidia1" {
		t.Errorf("GPU 1 = %+v; want the alias H100-SXM, NUMA node 1 with CPUs 8-15, /dev/nvidia1", g)
	}
}

// TestDiscover_MIG: a GPU with MIG on is offered as its instances, each
// with the parent's nodes plus the capability nodes of its GPU and compute
// instance, a type naming the profile, and the parent's UUID; a GPU with
// MIG off beside it stays whole.
func TestDiscover_MIG(t *testing.T) {
	t.Parallel()
	fake := &gputest.NVML{Driver: "580.159.04", GPUs: []gputest.GPU{
		{Name: "NVIDIA H200", UUID: "GPU-aaaa", Minor: 0, Memory: 150 << 30, PCI: "00000000:00:06.0", NUMA: -1, MIG: []gpu.MIGDevice{
			{UUID: "MIG-1111", Name: "NVIDIA H200 MIG 3g.71gb", Memory: 71 << 30, GI: 1, CI: 0},
			{UUID: "MIG-2222", Name: "NVIDIA H200 MIG 1g.18gb", Memory: 18 << 30, GI: 2, CI: 0},
		}},
		{Name: "NVIDIA H200", UUID: "GPU-bbbb", Minor: 1, Memory: 150 << 30, PCI: "00000000:00:07.0", NUMA: 1},
	}}
	inv := gpu.Discover(t.Context(), gpu.Options{NVML: fake, Root: "testdata/nvidia", Aliases: map[string]string{"NVIDIA H200 MIG 1g.18gb": "H200-small"}})
	if len(inv.GPUs) != 3 {
		t.Fatalf("Discover = %+v, want two MIG instances and one whole GPU", inv)
	}
	base := []gpu.Node{{Path: "/dev/nvidia0", Type: 'c', Major: 195, Minor: 0}, {Path: "/dev/nvidiactl", Type: 'c', Major: 195, Minor: 255},
		{Path: "/dev/nvidia-uvm", Type: 'c', Major: 509, Minor: 0}}
	want := gpu.GPU{Index: 0, UUID: "MIG-1111", Name: "NVIDIA H200 MIG 3g.71gb", Type: "H200-MIG-3g.71gb", Vendor: gpu.VendorNVIDIA,
		Memory: 71 << 30, PCI: "0000:00:06.0", NUMANode: 0, CPUs: "0-7",
		Nodes: append(append([]gpu.Node(nil), base...), gpu.Node{Path: "/dev/nvidia-caps/nvidia-cap12", Type: 'c', Major: 510, Minor: 12},
			gpu.Node{Path: "/dev/nvidia-caps/nvidia-cap13", Type: 'c', Major: 510, Minor: 13}),
		ProfilingNodes: []gpu.Node{{Path: "/dev/nvidia-uvm-tools", Type: 'c', Major: 509, Minor: 1}},
		ProcDir:        "/proc/driver/nvidia/gpus/0000:00:06.0",
		VisibleEnv:     []string{"CUDA_VISIBLE_DEVICES=MIG-1111"},
		Parent:         "GPU-aaaa",
	}
	if diff := cmp.Diff(want, inv.GPUs[0]); diff != "" {
		t.Errorf("MIG instance 0 (-want +got):\n%s", diff)
	}
	if g := inv.GPUs[1]; g.Type != "H200-small" || g.Index != 1 || g.Nodes[3].Minor != 21 || g.Nodes[4].Minor != 22 {
		t.Errorf("MIG instance 1 = %+v; want the alias and caps 21, 22", g)
	}
	if g := inv.GPUs[2]; g.UUID != "GPU-bbbb" || g.Index != 2 || g.Parent != "" || g.Type != "H200" {
		t.Errorf("the whole GPU = %+v", g)
	}

	// An instance the driver's table does not know is an error, not a
	// GPU without its capability nodes (which CUDA would refuse).
	fake.GPUs[0].MIG[1].GI = 9
	if inv := gpu.Discover(t.Context(), gpu.Options{NVML: fake, Root: "testdata/nvidia"}); len(inv.GPUs) != 0 ||
		!strings.Contains(strings.Join(inv.Notes, ";"), "no gpu0/gi9/access") {
		t.Errorf("an instance without caps = %+v", inv)
	}
}

func TestDiscover_AMD(t *testing.T) {
	t.Parallel()
	noDriver := &gputest.NVML{InitErr: errors.New("nvml: library not found")}
	inv := gpu.Discover(t.Context(), gpu.Options{NVML: noDriver, Root: "testdata/amd"})
	if inv.Vendor != gpu.VendorAMD || inv.Driver != "6.8.5" || len(inv.GPUs) != 2 {
		t.Fatalf("Discover = %+v, want 2 AMD GPUs", inv)
	}
	want := gpu.GPU{Index: 0, UUID: "GPU-cfcc7721fa128f38", Name: "AMD Instinct MI300X", Type: "MI300X", Vendor: gpu.VendorAMD,
		Memory: 206141652992, PCI: "0000:c1:00.0", NUMANode: 1, CPUs: "48-95",
		Nodes:      []gpu.Node{{Path: "/dev/kfd", Type: 'c', Major: 235}, {Path: "/dev/dri/renderD128", Type: 'c', Major: 226, Minor: 128}},
		VisibleEnv: []string{"ROCR_VISIBLE_DEVICES=GPU-cfcc7721fa128f38"},
	}
	if diff := cmp.Diff(want, inv.GPUs[0]); diff != "" {
		t.Errorf("GPU 0 (-want +got):\n%s", diff)
	}
	// The second has no unique id and no NUMA node, and sysfs names it.
	if g := inv.GPUs[1]; g.Type != "MI325X" || g.UUID != "AMD-0000:05:00.0" || g.NUMANode != -1 || g.CPUs != "" || g.Nodes[1].Minor != 136 {
		t.Errorf("GPU 1 = %+v", g)
	}
}

func TestDiscover_NoGPU(t *testing.T) {
	t.Parallel()
	inv := gpu.Discover(t.Context(), gpu.Options{NVML: &gputest.NVML{InitErr: errors.New("nvml: library not found")}, Root: "testdata/none"})
	if inv.Vendor != gpu.VendorNone || len(inv.GPUs) != 0 || len(inv.Notes) != 2 {
		t.Fatalf("Discover = %+v, want none, with a note per backend", inv)
	}
	if !strings.Contains(inv.Notes[0], "library not found") || !strings.Contains(inv.Notes[1], "no amdgpu driver") {
		t.Errorf("notes = %q, want each backend's reason", inv.Notes)
	}
}

// TestDiscover_RealHost runs the real NVML adapter: on a host without the
// driver (CI) it must report none and not crash, which is what lazy
// binding is for; on the GPU machine it lists the GPUs.
func TestDiscover_RealHost(t *testing.T) {
	t.Parallel()
	inv := gpu.Discover(t.Context(), gpu.Options{})
	t.Logf("vendor %s, driver %q, %d GPUs, notes %q", inv.Vendor, inv.Driver, len(inv.GPUs), inv.Notes)
	for _, g := range inv.GPUs {
		t.Logf("GPU %d: %s (%s) %s %s NUMA %d CPUs %q nodes %v", g.Index, g.Name, g.Type, g.UUID, g.PCI, g.NUMANode, g.CPUs, g.Nodes)
		if g.UUID == "" || g.Type == "" || len(g.Nodes) == 0 {
			t.Errorf("GPU %d lacks an identity or nodes: %+v", g.Index, g)
		}
	}
	if inv.Vendor == gpu.VendorNone && len(inv.Notes) == 0 {
		t.Errorf("no GPU and no note saying why")
	}
}

func TestTypeOf(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"NVIDIA H200": "H200", "NVIDIA H100 80GB HBM3": "H100", "NVIDIA A100-SXM4-40GB": "A100", "NVIDIA B200": "B200",
		"Tesla V100-SXM2-16GB": "V100", "NVIDIA L4": "L4", "NVIDIA GeForce RTX 4090": "RTX4090", "AMD Instinct MI300X": "MI300X",
		"NVIDIA H100 PCIe": "H100", "weird": "weird",
	} {
		if got := gpu.TypeOf(name, nil); got != want {
			t.Errorf("TypeOf(%q) = %q, want %q", name, got, want)
		}
	}
	if got := gpu.TypeOf("NVIDIA H100 PCIe", map[string]string{"NVIDIA H100 PCIe": "H100-PCIe"}); got != "H100-PCIe" {
		t.Errorf("TypeOf with a name alias = %q", got)
	}
}

func TestParseCPUList(t *testing.T) {
	t.Parallel()
	got, err := gpu.ParseCPUList("0-3,8,10-11\n")
	if err != nil || !cmp.Equal(got, []int{0, 1, 2, 3, 8, 10, 11}) {
		t.Errorf("ParseCPUList = %v, %v", got, err)
	}
	for _, bad := range []string{"a", "3-1", "1-x"} {
		if _, err := gpu.ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) = nil error", bad)
		}
	}
}

// TestDiscover_NVLink: each GPU counts its links to each other GPU, found
// by the PCI id at the far end (NVML's form, padded); a link to something
// that is not one of the box's GPUs counts for nothing.
func TestDiscover_NVLink(t *testing.T) {
	t.Parallel()
	fake := &gputest.NVML{Driver: "580.159.04", GPUs: []gputest.GPU{
		{Name: "NVIDIA H200", UUID: "GPU-aaaa", Minor: 0, PCI: "00000000:00:06.0", NUMA: 0,
			NVLink: []string{"00000000:00:07.0", "00000000:00:07.0", "00000000:0f:00.0"}},
		{Name: "NVIDIA H200", UUID: "GPU-bbbb", Minor: 1, PCI: "00000000:00:07.0", NUMA: 0,
			NVLink: []string{"00000000:00:06.0", "00000000:00:06.0"}},
	}}
	inv := gpu.Discover(t.Context(), gpu.Options{NVML: fake, Root: "testdata/nvidia"})
	if len(inv.GPUs) != 2 {
		t.Fatalf("Discover = %+v, want 2 GPUs", inv)
	}
	if got := inv.GPUs[0].Links; !cmp.Equal(got, map[string]int{"GPU-bbbb": 2}) {
		t.Errorf("GPU 0 links = %v, want 2 to GPU-bbbb", got)
	}
	if got := inv.GPUs[1].Links; !cmp.Equal(got, map[string]int{"GPU-aaaa": 2}) {
		t.Errorf("GPU 1 links = %v, want 2 to GPU-aaaa", got)
	}
}
