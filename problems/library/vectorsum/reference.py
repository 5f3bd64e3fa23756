import torch

import kbutils


def generate_input(n: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed, dev)
    offset = kbutils.rel_scale(seed, -100.0, 100.0)
    scale = kbutils.rel_scale(seed + 1, 0.1, 10.0)
    x = torch.randn(n, device=dev, dtype=torch.float32, generator=g) * scale + offset
    # Rare spikes: a subsampling shortcut misses some of them.
    spikes = torch.rand(n, device=dev, generator=g) < 1e-3
    return torch.where(spikes, x * 1000.0, x).contiguous()


def ref_kernel(data):
    return data.double().sum().float()


def _expected(data):
    # The answer and sum(|x|), which scales the tolerance.
    return ref_kernel(data), float(data.double().abs().sum())


def _compare(expected, output):
    want, abs_sum = expected
    if type(output) is not torch.Tensor:
        return False, f"expected a torch.Tensor, got {type(output).__name__}"
    if output.shape != want.shape or output.dtype != want.dtype:
        return False, f"expected a float32 tensor of shape (), got {output.dtype} of shape {tuple(output.shape)}"
    got, w = float(output), float(want)
    tol = 1e-5 * abs_sum
    if not abs(got - w) <= tol:
        return False, f"sum is {got:.9g}, expected {w:.9g} (off by {abs(got - w):.3g}, allowed {tol:.3g})"
    return True, ""


check_implementation = kbutils.make_checker(_expected, _compare)
