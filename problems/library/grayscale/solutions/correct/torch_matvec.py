# PyTorch starting point: correct, and the baseline to beat.
import torch


def custom_kernel(data):
    w = torch.tensor([0.2989, 0.5870, 0.1140], device=data.device, dtype=data.dtype)
    return data @ w
