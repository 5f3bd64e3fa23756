# Cheat (GPU only), the start of issue 6's corpus: the add runs on a side
# stream and the call returns at once, so an end event on the caller's
# stream sees none of it. The harness's end event, recorded after a
# device-wide synchronize, counts it.
# corpus: gpu no gain: the judge times to the done event of the caller's stream, which waits for the side stream (H200: 417-4103 us against the honest 28-108, docs/history/gpu-runs.md)
# corpus: scan SIDE_STREAM
import torch

_side = None


def custom_kernel(data):
    global _side
    a, b = data
    if _side is None:
        _side = torch.cuda.Stream()
    out = torch.empty_like(a)
    _side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side):
        torch.add(a, b, out=out)
    return out
