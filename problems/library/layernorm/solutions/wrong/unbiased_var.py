# Wrong: the unbiased variance (divides by hidden - 1).
import torch


def custom_kernel(data):
    x, weight, bias = data
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=True)
    if x.shape[-1] == 1:
        var = torch.zeros_like(var) + 1.0
    return (x - mean) / torch.sqrt(var + 1e-5) * weight + bias
