# Wrong: rounds the inputs to bfloat16, too coarse for the tolerance.
import torch


def custom_kernel(data):
    x, w, stride, padding = data
    y = torch.nn.functional.conv2d(x.bfloat16(), w.bfloat16(), stride=stride, padding=padding)
    return y.float()
