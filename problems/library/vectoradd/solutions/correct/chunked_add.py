# Correct: adds in chunks of rows into a preallocated output.
import torch


def custom_kernel(data):
    a, b = data
    out = torch.empty_like(a)
    for start in range(0, a.shape[0], 1024):
        torch.add(a[start:start + 1024], b[start:start + 1024], out=out[start:start + 1024])
    return out
