# Correct: im2col with unfold, then one matrix product.
import torch


def custom_kernel(data):
    x, w, stride, padding = data
    n, c, h, _ = x.shape
    o, _, k, _ = w.shape
    out = (h + 2 * padding - k) // stride + 1
    cols = torch.nn.functional.unfold(x, k, padding=padding, stride=stride)  # (n, c*k*k, out*out)
    y = w.reshape(o, -1) @ cols
    return y.reshape(n, o, out, out)
