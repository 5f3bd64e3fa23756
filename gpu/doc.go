// Package gpu will hold GPU discovery, device nodes, telemetry, health and
// clock control (NVML through go-nvml, AMD through sysfs). It imports only
// the leaf packages. Not implemented yet: the GPU issue builds it.
package gpu
