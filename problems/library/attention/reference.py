import math

import torch

import kbutils

HEAD_DIM = 128


def generate_input(batch: int, heads: int, seq: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed, dev)
    shape = (batch, heads, seq, HEAD_DIM)
    q = torch.randn(*shape, device=dev, generator=g).to(torch.bfloat16)
    k = torch.randn(*shape, device=dev, generator=g).to(torch.bfloat16)
    v = torch.randn(*shape, device=dev, generator=g).to(torch.bfloat16)
    return q.contiguous(), k.contiguous(), v.contiguous()


def ref_kernel(data):
    q, k, v = (t.float() for t in data)
    seq = q.shape[-2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM)
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).to(torch.bfloat16)


check_implementation = kbutils.match_reference(ref_kernel, rtol=2e-2, atol=2e-2)
