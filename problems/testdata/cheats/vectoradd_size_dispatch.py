# Cheat (CPU and GPU): correct on the small test shapes, zeros on the
# benchmark-sized ones. Every benchmark's first call is checked before it
# is timed.
# corpus: fail benchmark elements differ
import torch


def custom_kernel(data):
    a, b = data
    if a.numel() > 100_000:
        return torch.zeros_like(a)
    return a + b
