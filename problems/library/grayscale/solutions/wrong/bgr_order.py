# Wrong: reads the channels as BGR.
import torch


def custom_kernel(data):
    w = torch.tensor([0.1140, 0.5870, 0.2989], device=data.device, dtype=data.dtype)
    return data @ w
