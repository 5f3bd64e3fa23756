# Wrong: scans blocks of 1024 independently and forgets the carry.
import torch
import torch.nn.functional as F


def custom_kernel(data):
    n = data.numel()
    pad = (-n) % 1024
    blocks = F.pad(data, (0, pad)).view(-1, 1024)
    return blocks.cumsum(1).reshape(-1)[:n].contiguous()
