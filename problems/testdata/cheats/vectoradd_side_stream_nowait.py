# Cheat (GPU only): the add runs on a side stream that does not wait for
# the caller's stream, and the call returns at once, hoping the work runs
# while the caller's stream is still busy before the start event. The
# harness queues the input's copy after its head start on the caller's
# stream, so this reads stale memory (a wrong result in the ranked phase,
# whose inputs change every call) or, when it runs late, is timed by the
# device-wide end.
# corpus: gpu reads stale memory: a wrong result
# corpus: scan SIDE_STREAM
import torch

_side = None


def custom_kernel(data):
    global _side
    a, b = data
    if _side is None:
        _side = torch.cuda.Stream()
    out = torch.empty_like(a)
    with torch.cuda.stream(_side):
        torch.add(a, b, out=out)
    return out
