# Cheat (GPU): leaves the GPU busy after each call. The judge measured the
# clock's fixed cost with null calls interleaved with the submission's,
# so a long kernel left running on a side stream slowed the null call
# that followed, and every net time came out smaller: 0.78-0.81x on an
# H100, unflagged. The offset is now measured before the submission is
# imported and again after its worker is gone; the left work slows only
# the submission's own next call.
# corpus: scan SIDE_STREAM
# corpus: nogain leaderboard
# corpus: gpu no gain: no null call runs while the worker lives
import torch

_side = None


def custom_kernel(data):
    global _side
    a, b = data
    out = a + b
    if a.is_cuda:
        if _side is None:
            _side = torch.cuda.Stream()
        with torch.cuda.stream(_side):
            torch.cuda._sleep(400_000)  # ~200 us of GPU, after the call's own work
    return out
