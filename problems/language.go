package problems

import (
	"path/filepath"
	"regexp"
	"strings"
)

// The kinds of submission (Language) a leaderboard shows.
const (
	KindPyTorch    = "PyTorch"
	KindTriton     = "Triton"
	KindCUDAInline = "CUDA inline"
	KindCUDA       = "CUDA"
	KindHIP        = "HIP"
	KindCuTe       = "CuTe DSL"
)

var (
	cuteRE   = regexp.MustCompile(`(?m)^\s*(import|from)\s+cutlass\b`)
	tritonRE = regexp.MustCompile(`(?m)^\s*(import|from)\s+triton\b`)
	inlineRE = regexp.MustCompile(`\bload_inline\s*\(|torch\.utils\.cpp_extension`)
	hipRE    = regexp.MustCompile(`\bhip[A-Z]\w*\s*\(|#include\s*[<"]hip/`)
)

// Language says what a submission is written in, as KernelBot's
// leaderboards show it: a native .cu (or .hip) file, or Python that
// builds CUDA inline, uses CuTe DSL or Triton, or plain PyTorch. It reads
// the text (an archive's, as ArchiveText gives it) and is a label for
// people, not a check: a file that does several things gets the most
// specific.
func Language(fileName string, code []byte) string {
	text := string(code)
	if IsArchive(fileName) {
		text = ArchiveText(code, fileName)
	}
	switch ext := strings.ToLower(filepath.Ext(fileName)); {
	case ext == ".hip":
		return KindHIP
	case ext == ".cu" || ext == ".cuh":
		if hipRE.MatchString(text) {
			return KindHIP
		}
		return KindCUDA
	}
	switch {
	case cuteRE.MatchString(text):
		return KindCuTe
	case inlineRE.MatchString(text):
		if hipRE.MatchString(text) {
			return KindHIP
		}
		return KindCUDAInline
	case tritonRE.MatchString(text):
		return KindTriton
	}
	return KindPyTorch
}
