import math

import torch

import kbutils


def generate_input(batch: int, in_ch: int, out_ch: int, size: int, kernel: int, stride: int, padding: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed, dev)
    x = torch.randn(batch, in_ch, size, size, device=dev, generator=g)
    w = torch.randn(out_ch, in_ch, kernel, kernel, device=dev, generator=g) / math.sqrt(in_ch * kernel * kernel)
    return x.contiguous(), w.contiguous(), stride, padding


def ref_kernel(data):
    x, w, stride, padding = data
    return torch.nn.functional.conv2d(x.double(), w.double(), stride=stride, padding=padding).float()


check_implementation = kbutils.match_reference(ref_kernel, rtol=5e-3, atol=5e-3)
