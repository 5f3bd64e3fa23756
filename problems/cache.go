package problems

import "path/filepath"

// The compile caches a run may keep across runs, each a directory under a
// cache root: the environment variable that moves it there and its name.
// Each of these caches keys its entries itself by what decides a build:
// Triton by the kernel's source, its options, the Triton version and the
// GPU's target; the CUDA driver's JIT cache by the PTX, the driver version
// and the architecture; inductor by the graph, the torch version, its
// config and the device's properties; load_inline's build directories by
// the extension's name, where ninja rebuilds whenever the sources or the
// command (compiler, flags, include paths, -gencode for the GPU found)
// change. So one root can serve every run of a submitter, on any GPU type
// and across toolkit upgrades: the box supplies only the root, one per
// submitter (never shared between users: an entry is code that is run).
var cacheDirs = []struct{ env, dir string }{
	{"TRITON_CACHE_DIR", "triton"},
	{"TORCH_EXTENSIONS_DIR", "torch_extensions"},
	{"TORCHINDUCTOR_CACHE_DIR", "inductor"},
	{"CUDA_CACHE_PATH", "cuda"},
}

// CacheEnv returns env with the compile caches under root (see cacheDirs),
// replacing any earlier setting of their variables; with root "" it
// returns env as it is, and the caches stay where the tools put them by
// default (under HOME, which a sandboxed run loses when it ends).
func CacheEnv(env []string, root string) []string {
	if root == "" {
		return env
	}
	out := append([]string(nil), env...)
	for _, c := range cacheDirs {
		out = envWith(out, c.env, filepath.Join(root, c.dir))
	}
	return out
}
