# Wrong: forgets the causal mask, so every position sees the future.
import math

import torch


def custom_kernel(data):
    q, k, v = (t.float() for t in data)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return (torch.softmax(scores, -1) @ v).to(torch.bfloat16)
