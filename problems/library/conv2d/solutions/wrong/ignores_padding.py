# Wrong: convolves without padding and pads the result with zeros to the
# expected size, so every border output is wrong.
import torch


def custom_kernel(data):
    x, w, stride, padding = data
    y = torch.nn.functional.conv2d(x, w, stride=stride)
    out = (x.shape[-1] + 2 * padding - w.shape[-1]) // stride + 1
    p = out - y.shape[-1]
    return torch.nn.functional.pad(y, (p // 2, p - p // 2, p // 2, p - p // 2))
