# PyTorch starting point: correct, and the baseline to beat.
import torch


def custom_kernel(data):
    return torch.cumsum(data, dim=0)
