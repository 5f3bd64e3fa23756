# PyTorch starting point: correct, and the baseline to beat.
import torch


def custom_kernel(data):
    return torch.bincount(data.long(), minlength=256).to(torch.int32)
