import math

import torch

import kbutils


def generate_input(m: int, k: int, n: int, world_size: int, rank: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed * 1009 + rank, dev)
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=g)
    b = (torch.randn(k, n, device=dev, dtype=torch.float32, generator=g) / math.sqrt(k)).to(torch.bfloat16)
    return a, b


def ref_kernel(datas):
    """Every rank's input in, every rank's output out, in float32 and
    rounded once."""
    dev = datas[0][0].device
    a = torch.cat([x.to(dev) for x, _ in datas]).float()
    return [(a @ b.to(dev).float()).to(torch.bfloat16).to(b.device) for _, b in datas]


check_implementation = kbutils.match_reference(ref_kernel, rtol=2e-2, atol=2e-2)
