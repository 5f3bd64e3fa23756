# Correct: per-block partial sums in float32, then a sum of the partials,
# as a two-pass GPU reduction would do it.
import torch.nn.functional as F


def custom_kernel(data):
    n = data.numel()
    pad = (-n) % 4096
    parts = F.pad(data, (0, pad)).view(-1, 4096).sum(dim=1)
    return parts.sum()
