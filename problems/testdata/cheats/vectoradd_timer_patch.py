# Cheat (CPU and GPU): slows the clock the harness reads, written out
# plainly. Refused at submission.
# corpus: scan TIMER_PATCH
import time

_real = time.perf_counter_ns
time.perf_counter_ns = lambda: _real() // 10


def custom_kernel(data):
    a, b = data
    return a + b
