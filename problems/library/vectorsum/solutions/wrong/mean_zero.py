# Wrong: assumes zero-mean data and returns zero.
import torch


def custom_kernel(data):
    return torch.zeros((), dtype=data.dtype, device=data.device)
