# Wrong: normalises but forgets weight and bias.
import torch


def custom_kernel(data):
    x, weight, bias = data
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), None, None, 1e-5)
