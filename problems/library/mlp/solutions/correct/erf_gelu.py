# Correct: the erf GELU written out, hidden activation in float32.
import math

import torch


def custom_kernel(data):
    x, w1, b1, w2, b2 = (t.float() for t in data)
    h = x @ w1 + b1
    h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))
    return (h @ w2 + b2).to(torch.bfloat16)
