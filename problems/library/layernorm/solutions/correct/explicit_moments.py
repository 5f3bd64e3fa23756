# Correct: mean and biased variance computed explicitly.
import torch


def custom_kernel(data):
    x, weight, bias = data
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + 1e-5) * weight + bias
