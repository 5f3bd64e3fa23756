# Correct: the numerically stable form written out.
import torch


def custom_kernel(data):
    e = torch.exp(data - data.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)
