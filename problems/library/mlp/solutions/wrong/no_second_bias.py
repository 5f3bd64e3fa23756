# Wrong: forgets the second bias.
import torch


def custom_kernel(data):
    x, w1, b1, w2, b2 = data
    h = torch.nn.functional.gelu(torch.addmm(b1, x, w1))
    return h @ w2
