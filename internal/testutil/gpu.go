package testutil

import (
	"os"
	"testing"

	"kernelbox/problems"
)

// EnvGPU turns on the tests that need the GPU machine ("1"): `make
// test/gpu` sets it, and docs/performance.md gives the one device call
// that runs them there with bench/gpu.sh.
const EnvGPU = "KERNELBOX_TEST_GPU"

// RequireGPU returns the interpreter whose PyTorch sees a CUDA device, or
// skips the test saying what is missing: the opt-in (EnvGPU=1, so that a
// developer's workstation with a GPU is not taken over by minutes of GPU
// runs) or a PyTorch that sees a GPU.
func RequireGPU(tb testing.TB) *problems.Interpreter {
	tb.Helper()
	if os.Getenv(EnvGPU) != "1" {
		tb.Skipf("needs the GPU machine: set %s=1 there and run make test/gpu (docs/performance.md gives the device call)", EnvGPU)
	}
	it := RequireTorch(tb)
	if it.Device != "cuda" {
		tb.Skipf("needs a GPU: %s=1 is set but this machine's PyTorch (%s) sees no CUDA device", EnvGPU, it.Path)
	}
	return it
}
