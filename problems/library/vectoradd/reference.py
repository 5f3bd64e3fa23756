import torch

import kbutils


def generate_input(rows: int, cols: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed, dev)
    a = torch.randn(rows, cols, device=dev, dtype=torch.float16, generator=g)
    b = torch.randn(rows, cols, device=dev, dtype=torch.float16, generator=g)
    return a, b


def ref_kernel(data):
    a, b = data
    return a + b


check_implementation = kbutils.match_reference(ref_kernel, rtol=1e-3, atol=1e-3)
