import math

import torch

import kbutils


def generate_input(tokens: int, d_model: int, d_ff: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed, dev)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, device=dev, generator=g) * scale).to(torch.bfloat16).contiguous()

    x = rnd(tokens, d_model)
    w1 = rnd(d_model, d_ff, scale=1 / math.sqrt(d_model))
    b1 = rnd(d_ff, scale=0.5)
    w2 = rnd(d_ff, d_model, scale=1 / math.sqrt(d_ff))
    b2 = rnd(d_model, scale=0.5)
    return x, w1, b1, w2, b2


def ref_kernel(data):
    x, w1, b1, w2, b2 = (t.float() for t in data)
    h = torch.nn.functional.gelu(x @ w1 + b1)
    return (h @ w2 + b2).to(torch.bfloat16)


check_implementation = kbutils.match_reference(ref_kernel, rtol=2e-2, atol=2e-2)
