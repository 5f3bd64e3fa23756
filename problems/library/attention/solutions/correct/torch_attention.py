# PyTorch starting point: correct, and the baseline to beat.
import math

import torch


def custom_kernel(data):
    q, k, v = data
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None:
        return sdpa(q, k, v, is_causal=True)
    seq = q.shape[-2]
    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return (torch.softmax(scores, -1) @ v.float()).to(q.dtype)
