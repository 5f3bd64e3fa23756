# PyTorch starting point: correct, and the baseline to beat.
import torch


def custom_kernel(data):
    a, b = data
    return torch.matmul(a, b)
