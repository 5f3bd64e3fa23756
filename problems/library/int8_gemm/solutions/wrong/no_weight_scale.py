# Wrong: applies the activation scale but forgets the per-channel weight scale.
import torch


def custom_kernel(data):
    a, w, scale_a, scale_w = data
    acc = (a.double() @ w.double().t()).float()
    return (acc * scale_a[:, None]).to(torch.bfloat16)
