import torch

import kbutils


def generate_input(rows: int, cols: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed, dev)
    scale = kbutils.rel_scale(seed, 1.0, 8.0)
    offset = 60.0 + 60.0 * torch.rand(rows, 1, device=dev, generator=g)
    return (torch.randn(rows, cols, device=dev, generator=g) * scale + offset).contiguous()


def ref_kernel(data):
    return torch.softmax(data.double(), dim=-1).float()


check_implementation = kbutils.match_reference(ref_kernel, rtol=1e-4, atol=1e-6)
