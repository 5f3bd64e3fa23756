# kernelbox: requires cuda
# Triggers a device-side assert (an out-of-range index on the GPU): the
# harness must report a CUDA error (exit 110), not a wrong answer.
import torch


def custom_kernel(data):
    a, b = data
    idx = torch.tensor([a.numel() * 1000], device=a.device)
    return a.view(-1)[idx] + b.view(-1)[0]
