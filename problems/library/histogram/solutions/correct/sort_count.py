# Correct: counts the distinct values.
import torch


def custom_kernel(data):
    values, counts = torch.unique(data, return_counts=True)
    h = torch.zeros(256, dtype=torch.int32, device=data.device)
    h[values.long()] = counts.to(torch.int32)
    return h
