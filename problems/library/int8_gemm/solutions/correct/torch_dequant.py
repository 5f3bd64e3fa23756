# PyTorch starting point: correct, and the baseline to beat.
import torch


def custom_kernel(data):
    a, w, scale_a, scale_w = data
    if a.is_cuda and hasattr(torch, "_int_mm") and a.shape[0] > 16 and a.shape[1] % 8 == 0 and w.shape[0] % 8 == 0:
        acc = torch._int_mm(a, w.t()).float()
    else:
        acc = (a.double() @ w.double().t()).float()
    return (acc * scale_a[:, None] * scale_w[None, :]).to(torch.bfloat16)
