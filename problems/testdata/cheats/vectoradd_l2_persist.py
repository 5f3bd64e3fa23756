# Cheat (GPU): marks its input's addresses persisting in L2 through an
# access policy window on the caller's stream and leaves the window there.
# The caching allocator hands the next call's input copy the same
# addresses, so that copy would be written persisting and survive the L2
# flush, and the timed call would read its input from L2. The harness
# clears the window and resets persisting lines before every timed call.
# corpus: scan NATIVE_HOOK
# corpus: gpu no gain at 4096²: 28.3-29.2 us against plain a + b at 29.2-29.7 us (and slower, 31-36 us, with the reset taken out); the probe in docs/history/gpu-runs.md shows the window's gain on a plain read and the reset undoing it
import ctypes

import torch

_cu = None


class _Window(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hit_ratio", ctypes.c_float),
                ("hit_prop", ctypes.c_int), ("miss_prop", ctypes.c_int), ("pad", ctypes.c_char * 36)]


def _persist(t):
    global _cu
    if _cu is None:
        _cu = ctypes.CDLL("libcuda.so.1")
        # CU_LIMIT_PERSISTING_L2_CACHE_SIZE: as much as the device sets aside.
        _cu.cuCtxSetLimit(0x06, ctypes.c_size_t(64 << 20))
    # One window a stream: the first input's.
    w = _Window(t.data_ptr(), t.numel() * t.element_size(), 1.0, 2, 1)  # persisting hits, streaming misses
    _cu.cuStreamSetAttribute(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), 1, ctypes.byref(w))


def custom_kernel(data):
    a, b = data
    if a.is_cuda:
        _persist(a)
    return a + b
