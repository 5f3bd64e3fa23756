import torch

import kbutils


def generate_input(m: int, n: int, k: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed, dev)
    a = torch.randint(-128, 128, (m, k), device=dev, generator=g, dtype=torch.int16).to(torch.int8)
    w = torch.randint(-128, 128, (n, k), device=dev, generator=g, dtype=torch.int16).to(torch.int8)
    scale_a = (torch.rand(m, device=dev, generator=g) + 0.5) / 127.0
    scale_w = (torch.rand(n, device=dev, generator=g) + 0.5) / (127.0 * k ** 0.5)
    return a.contiguous(), w.contiguous(), scale_a, scale_w


def ref_kernel(data):
    a, w, scale_a, scale_w = data
    # float64 holds every int32 partial sum exactly (|sum| < 2^31 < 2^53).
    acc = a.double() @ w.double().t()
    return (acc * scale_a.double()[:, None] * scale_w.double()[None, :]).to(torch.bfloat16)


check_implementation = kbutils.match_reference(ref_kernel, rtol=1e-2, atol=1e-2)
