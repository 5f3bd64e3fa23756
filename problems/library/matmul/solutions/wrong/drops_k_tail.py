# Wrong: a tiled loop that ignores the last partial tile of k.
import torch


def custom_kernel(data):
    a, b = data
    k = (a.shape[1] // 32) * 32
    if k == 0:
        return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    return torch.matmul(a[:, :k], b[:k, :])
