package problems

import "testing"

func TestLanguage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, code, want string
	}{
		{"plain torch", "s.py", "import torch\ndef custom_kernel(d):\n    return d[0] + d[1]\n", KindPyTorch},
		{"triton", "s.py", "import torch\nimport triton\nimport triton.language as tl\n", KindTriton},
		{"triton, from", "s.py", "from triton import jit\n", KindTriton},
		{"load_inline", "s.py", "from torch.utils.cpp_extension import load_inline\nmod = load_inline(name='x', cpp_sources='')\n", KindCUDAInline},
		{"inline beats triton", "s.py", "import triton\nfrom torch.utils.cpp_extension import load_inline\n", KindCUDAInline},
		{"cute", "s.py", "import cutlass\nimport cutlass.cute as cute\n", KindCuTe},
		{"native cu", "kernel.cu", "__global__ void k() {}\n", KindCUDA},
		{"hip in a cu", "kernel.cu", "#include <hip/hip_runtime.h>\n", KindHIP},
		{"hip file", "k.hip", "", KindHIP},
		{"a comment naming triton", "s.py", "# faster than triton\nimport torch\n", KindPyTorch},
	}
	for _, tt := range tests {
		if got := Language(tt.file, []byte(tt.code)); got != tt.want {
			t.Errorf("%s: Language = %q, want %q", tt.name, got, tt.want)
		}
	}
}
