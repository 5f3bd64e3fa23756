# Correct: scans blocks, then adds the scanned block totals (a two-level scan).
import torch.nn.functional as F


def custom_kernel(data):
    n = data.numel()
    pad = (-n) % 1024
    blocks = F.pad(data, (0, pad)).view(-1, 1024).double()
    scanned = blocks.cumsum(1)
    carry = scanned[:, -1].cumsum(0) - scanned[:, -1]
    return (scanned + carry[:, None]).reshape(-1)[:n].float().contiguous()
