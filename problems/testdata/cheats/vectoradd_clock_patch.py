# Cheat (CPU and GPU): replaces the clock the harness times with, through
# names the static scanner does not spell out. The harness binds its clock
# before the submission loads and checks its functions after every job.
# corpus: fail test the submission replaced time.perf_counter_ns
# corpus: fail benchmark the submission replaced time.perf_counter_ns
import importlib

_t = importlib.import_module("ti" + "me")
_real = getattr(_t, "perf_counter_" + "ns")
setattr(_t, "perf_counter_" + "ns", lambda: _real() // 1000)


def custom_kernel(data):
    a, b = data
    return a + b
