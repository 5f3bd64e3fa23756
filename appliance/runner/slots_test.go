package runner

import (
	"slices"
	"testing"

	"kernelbox/gpu"
)

func gangSlot(uuid string, numa int, links map[string]int) Slot {
	return Slot{ID: uuid, GPUType: "H200", Device: "cuda", Cpuset: "c-" + uuid,
		GPU: &gpu.GPU{UUID: uuid, NUMANode: numa, Links: links, ProcDir: "/proc/driver/nvidia/gpus/" + uuid,
			VisibleEnv: []string{"CUDA_VISIBLE_DEVICES=" + uuid, "CUDA_DEVICE_ORDER=PCI_BUS_ID"},
			Nodes:      []gpu.Node{{Path: "/dev/nvidia-" + uuid, Type: 'c'}, {Path: "/dev/nvidiactl", Type: 'c'}}}}
}

// TestPickGang: a multi-GPU job gets the free GPUs that share NVLinks,
// then a NUMA node; one GPU is the first free one.
func TestPickGang(t *testing.T) {
	t.Parallel()
	// Two NVLink pairs, a and b on NUMA node 0, c and d on node 1.
	a := gangSlot("a", 0, map[string]int{"b": 4})
	b := gangSlot("b", 0, map[string]int{"a": 4})
	c := gangSlot("c", 1, map[string]int{"d": 4})
	d := gangSlot("d", 1, map[string]int{"c": 4})
	// No links: NUMA nodes alternate.
	e, f, g, h := gangSlot("e", 0, nil), gangSlot("f", 1, nil), gangSlot("g", 0, nil), gangSlot("h", 1, nil)
	cpu := []Slot{{ID: "cpu:0", GPUType: "cpu"}, {ID: "cpu:1", GPUType: "cpu"}, {ID: "cpu:2", GPUType: "cpu"}}
	tests := []struct {
		name string
		free []Slot
		k    int
		want []string
	}{
		{"one GPU", []Slot{c, a, b}, 1, []string{"c"}},
		{"the linked pair", []Slot{a, c, b, d}, 2, []string{"a", "b"}},
		{"the pair still free", []Slot{a, c, d}, 2, []string{"c", "d"}},
		{"a NUMA node", []Slot{e, f, g, h}, 2, []string{"e", "g"}},
		{"all of them", []Slot{a, b, c}, 3, []string{"a", "b", "c"}},
		{"CPU slots in order", cpu, 2, []string{"cpu:0", "cpu:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PickGang(tt.free, tt.k)
			var ids []string
			for _, s := range got {
				ids = append(ids, s.ID)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tt.want) {
				t.Errorf("PickGang(%d) = %v, want %v", tt.k, ids, tt.want)
			}
		})
	}
}

// TestGang_Sandbox: a gang's run gets every GPU's nodes once, one
// CUDA_VISIBLE_DEVICES naming them in order, and the masks of the GPUs
// outside it only.
func TestGang_Sandbox(t *testing.T) {
	t.Parallel()
	a, b := gangSlot("a", 0, nil), gangSlot("b", 0, nil)
	a.Mask = []string{"/proc/driver/nvidia/gpus/b", "/proc/driver/nvidia/gpus/c"}
	b.Mask = []string{"/proc/driver/nvidia/gpus/a", "/proc/driver/nvidia/gpus/c"}
	g := Gang{a, b}
	if got := g.IDs(); got != "a+b" {
		t.Errorf("ids = %q", got)
	}
	var paths []string
	for _, d := range g.Devices("test") {
		paths = append(paths, d.Path)
	}
	if want := []string{"/dev/nvidia-a", "/dev/nvidiactl", "/dev/nvidia-b"}; !slices.Equal(paths, want) {
		t.Errorf("devices = %v, want %v", paths, want)
	}
	if got, want := g.Env(), []string{"CUDA_VISIBLE_DEVICES=a,b", "CUDA_DEVICE_ORDER=PCI_BUS_ID"}; !slices.Equal(got, want) {
		t.Errorf("env = %v, want %v", got, want)
	}
	if got, want := g.Mask(), []string{"/proc/driver/nvidia/gpus/c"}; !slices.Equal(got, want) {
		t.Errorf("mask = %v, want %v", got, want)
	}
	if got := g.Cpuset(); got != "c-a,c-b" {
		t.Errorf("cpuset = %q", got)
	}
}
