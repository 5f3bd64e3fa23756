# Wrong: an exclusive scan (out[i] leaves out x[i]).
import torch


def custom_kernel(data):
    return torch.cumsum(data, 0) - data
