package api

import "time"

// GPUsStatus is what `kernelbox gpus` shows (GET /api/gpus).
type GPUsStatus struct {
	Vendor string   `json:"vendor"`
	Driver string   `json:"driver,omitempty"`
	Notes  []string `json:"notes,omitempty"`
	// Profiler says what profile mode does here, and why.
	Profiler string      `json:"profiler,omitempty"`
	Slots    []SlotState `json:"slots"`
}

// SlotState is one slot (a GPU, or a CPU-backend slot) and what it is doing.
type SlotState struct {
	ID      string `json:"id"`  // "cpu:0", or a GPU's UUID
	GPUType string `json:"gpu"` // what leaderboards name: "cpu", "H200"
	Device  string `json:"device"`
	// Cpuset pins the slot's runs to these CPUs ("0-7"); empty for all.
	Cpuset string `json:"cpuset,omitempty"`
	// GPU is the slot's GPU; nil for a CPU slot.
	GPU *GPU `json:"gpu_info,omitempty"`
	// Clocks is the slot's clock profile, stored with every score:
	// "locked 1500-1500 MHz", or "default" and why.
	Clocks  string `json:"clocks,omitempty"`
	State   string `json:"state"`             // idle, running or drained
	Job     int64  `json:"job,omitempty"`     // the queue job it runs
	Drained string `json:"drained,omitempty"` // why it takes no jobs
	// Remote is where its job is out with the slurm executor: "Slurm job
	// 1234 RUNNING on gpu07".
	Remote string `json:"remote,omitempty"`
	// Now is the GPU's reading at the time of asking.
	Now *Telemetry `json:"telemetry,omitempty"`
}

// GPU is one GPU as the box found it.
type GPU struct {
	Index  int    `json:"index"`
	UUID   string `json:"uuid"`
	Name   string `json:"name"` // as the driver says it: "NVIDIA H200"
	Type   string `json:"type"` // as leaderboards say it: "H200"
	Vendor string `json:"vendor"`
	Memory uint64 `json:"memory_bytes"`
	PCI    string `json:"pci_bus_id"` // 0000:00:06.0
	// NUMANode is the GPU's NUMA node, -1 when the platform does not say.
	NUMANode int `json:"numa_node"`
	// CPUs are the CPUs of that NUMA node, as a cpuset ("0-15").
	CPUs string `json:"cpus,omitempty"`
	// Parent is the physical GPU's UUID when this is a MIG instance.
	Parent string `json:"parent,omitempty"`
	// Links counts the NVLink (or xGMI) links to each peer GPU, by UUID.
	Links map[string]int `json:"links,omitempty"`
}

// Telemetry is one reading of a GPU.
type Telemetry struct {
	At         time.Time `json:"at"`
	TempC      uint32    `json:"temp_c"`
	SMClockMHz uint32    `json:"sm_clock_mhz"`
	PowerMW    uint32    `json:"power_mw"`
	Reasons    uint64    `json:"clock_event_reasons"`
	MemUsed    uint64    `json:"memory_used_bytes"`
	Processes  int       `json:"compute_processes"`
}
