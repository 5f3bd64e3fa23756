import math

import torch

import kbutils


def generate_input(m: int, n: int, k: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed, dev)
    a = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
    b = (torch.randn(k, n, device=dev, generator=g) / math.sqrt(k)).to(torch.bfloat16)
    return a.contiguous(), b.contiguous()


def ref_kernel(data):
    a, b = data
    return (a.float() @ b.float()).to(torch.bfloat16)


check_implementation = kbutils.match_reference(ref_kernel, rtol=2e-2, atol=2e-2)
