// Package gpu finds the box's GPUs and describes each one: identity, the
// GPU type leaderboards name, memory, PCI address, NUMA node, and the
// device nodes a run on it needs. NVIDIA GPUs come from NVML (go-nvml,
// bound lazily, behind the small NVML interface so tests use a fake, see
// gputest), AMD GPUs from sysfs and the KFD topology without cgo, and a box
// with neither offers the CPU backend. Each has a peak for the physics
// floors: a GPU model's from its datasheet (PeakOf), the CPU backend's
// measured (CPUPeak). It imports only the leaf packages.
package gpu
