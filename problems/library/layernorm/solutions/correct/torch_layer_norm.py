# PyTorch starting point: correct, and the baseline to beat.
import torch


def custom_kernel(data):
    x, weight, bias = data
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, 1e-5)
