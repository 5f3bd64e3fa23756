# Cheat (GPU): in a window of several calls (short calls are timed that
# way, docs/integrity.md), finds the window's other inputs through the
# garbage collector and does their work in the first call, paying a fixed
# cost per launch (a sleep stands for it) once a window instead of once a
# call. The judge also times calls alone and refuses windows whose calls
# beat them by more than 25 % and 6 us: the calls alone, fixed cost and
# all, then count.
# corpus: scan EVALUATOR_INSPECTION
# corpus: gpu no gain: the garbage collector's walk in every call makes the worker's replies late, the late times count, and its calls are never short enough for windows (H100: 7.4-14.3 ms a call against the honest 36-136 us, docs/history/gpu-runs.md)
import gc

import torch

FIXED_CYCLES = 200_000  # ~100 us of sleep kernel
_ahead = {}  # an input's address -> its output, computed in the window's first call


def _window():
    for obj in gc.get_objects():
        if type(obj).__name__ == "Worker" and getattr(obj, "batch", None):
            return obj.batch
    return None


def custom_kernel(data):
    a, b = data
    key = a.data_ptr()
    if key in _ahead:
        return _ahead.pop(key)
    torch.cuda._sleep(FIXED_CYCLES)
    batch = _window()
    if batch and any(x[0].data_ptr() == key for x in batch):
        outs = {x[0].data_ptr(): x[0] + x[1] for x in batch}
        out = outs.pop(key)
        _ahead.clear()
        _ahead.update(outs)
        return out
    return a + b
