# Wrong: processes whole blocks of 128 columns only, leaving the tail at zero.
import torch


def custom_kernel(data):
    a, b = data
    out = torch.zeros_like(a)
    full = (a.shape[1] // 128) * 128
    out[:, :full] = a[:, :full] + b[:, :full]
    return out
