import torch

import kbutils

EPS = 1e-5


def generate_input(tokens: int, hidden: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed, dev)
    offset = torch.randn(tokens, 1, device=dev, generator=g) * 5
    scale = torch.rand(tokens, 1, device=dev, generator=g) * 4 + 0.25
    x = torch.randn(tokens, hidden, device=dev, generator=g) * scale + offset
    weight = torch.randn(hidden, device=dev, generator=g) * 0.5 + 1.0
    bias = torch.randn(hidden, device=dev, generator=g) * 0.1
    return x.contiguous(), weight, bias


def ref_kernel(data):
    x, weight, bias = data
    out = torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), weight.double(), bias.double(), EPS)
    return out.float()


check_implementation = kbutils.match_reference(ref_kernel, rtol=1e-4, atol=1e-4)
