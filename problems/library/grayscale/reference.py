import torch

import kbutils

WEIGHTS = (0.2989, 0.5870, 0.1140)


def generate_input(height: int, width: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed, dev)
    return torch.rand(height, width, 3, device=dev, dtype=torch.float32, generator=g)


def ref_kernel(data):
    w = torch.tensor(WEIGHTS, device=data.device, dtype=torch.float64)
    return (data.double() * w).sum(dim=-1).float()


check_implementation = kbutils.match_reference(ref_kernel, rtol=1e-4, atol=1e-4)
