"""Whether data written persisting in L2 outlives the harness's L2 flush,
and whether the harness's reset (eval._Timer.reset_l2) undoes it. GPU only.

    python3 bench/l2-persist.py

Each round is what the harness and a cheat do around one timed call: the
input copy, the flush, the timed read of the input, and then (the cheat)
an access policy window over the input's addresses left on the stream.
Three ways: no window; the window; the window and the harness's reset
before the copy. Prints the read's median per way and the reset's host
cost per call."""

import ctypes
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "problems", "library", "harness"))
import eval as harness  # noqa: E402

torch.empty(1, device="cuda")  # the context the driver calls below act on
cu = ctypes.CDLL("libcuda.so.1")
dev = ctypes.c_int()
cu.cuCtxGetDevice(ctypes.byref(dev))


def attr(n):
    v = ctypes.c_int()
    rc = cu.cuDeviceGetAttribute(ctypes.byref(v), n, dev)
    if rc:
        sys.exit(f"cuDeviceGetAttribute({n}): CUresult {rc}")
    return v.value


max_persist, max_window = attr(108), attr(109)
print(f"max persisting L2 {max_persist >> 20} MiB, max window {max_window >> 20} MiB, L2 {torch.cuda.get_device_properties(0).L2_cache_size >> 20} MiB")
rc = cu.cuCtxSetLimit(0x06, ctypes.c_size_t(max_persist))  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
print("cuCtxSetLimit(PERSISTING_L2_CACHE_SIZE):", rc)


class Window(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hit_ratio", ctypes.c_float),
                ("hit_prop", ctypes.c_int), ("miss_prop", ctypes.c_int), ("pad", ctypes.c_char * 36)]


size = min(max_persist, max_window, 32 << 20) // 4 * 4
src = torch.randn(size // 4, device="cuda")
x = torch.empty_like(src)
flush = torch.empty(max(2 * torch.cuda.get_device_properties(0).L2_cache_size, 256 << 20) // 4, dtype=torch.int32, device="cuda")
timer = harness._Timer(torch, time.perf_counter_ns)
stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def rounds(window, reset, n=200):
    times = []
    timer.reset_l2()
    for _ in range(n):
        torch.cuda.synchronize()
        if reset:
            timer.reset_l2()
        x.copy_(src)
        flush.zero_()
        start.record()
        x.sum()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
        if window:
            w = Window(x.data_ptr(), size, 1.0, 2, 1)  # persisting hits, streaming misses
            rc = cu.cuStreamSetAttribute(stream, 1, ctypes.byref(w))
            if rc:
                sys.exit(f"cuStreamSetAttribute: CUresult {rc} (stream {stream.value})")
    return statistics.median(times[20:])


print(f"read of {size >> 20} MiB after the flush, median of 180 (us):")
for _ in range(2):
    for name, window, reset in (("no window", False, False), ("window", True, False), ("window + harness reset", True, True)):
        print(f"  {name:24s} {rounds(window, reset):8.2f}")
print("harness reset status:", timer.l2_status or "ok")
torch.cuda.synchronize()
t0 = time.perf_counter_ns()
for _ in range(1000):
    timer.reset_l2()
print(f"reset_l2 host cost: {(time.perf_counter_ns() - t0) / 1000 / 1e3:.2f} us a call")
