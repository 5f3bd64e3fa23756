# PyTorch starting point: correct, and the baseline to beat.
import torch


def custom_kernel(data):
    x, w, stride, padding = data
    return torch.nn.functional.conv2d(x, w, stride=stride, padding=padding)
