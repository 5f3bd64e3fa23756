# Cheat (GPU): replies late on purpose. The judge used to time a call
# whose reply came after its head start again, on the same input, and
# count only the last attempt; this computed the answer on the first
# attempt, slept past the head start, and returned the kept answer with
# no kernel at all on the retry: 0.58x the honest time on an H100,
# unflagged. A late call's time now stands (it holds the sleep), and no
# call is timed twice.
# corpus: nogain leaderboard
# corpus: gpu no gain: its late times count, 30 ms a call
import time

import torch

_kept = {}


def custom_kernel(data):
    a, b = data
    key = (a.data_ptr(), a.shape)
    if key in _kept:
        return _kept.pop(key)
    out = a + b
    if a.is_cuda:
        _kept.clear()
        _kept[key] = out
        time.sleep(0.03)  # past the head start (0.5 ms, doubling to 20 ms)
    return out
