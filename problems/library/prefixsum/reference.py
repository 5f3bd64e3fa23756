import torch

import kbutils


def generate_input(n: int, seed: int):
    dev = kbutils.device()
    g = kbutils.generator(seed, dev)
    offset = kbutils.rel_scale(seed, -10.0, 10.0)
    scale = kbutils.rel_scale(seed + 1, 0.5, 5.0)
    return (torch.randn(n, device=dev, dtype=torch.float32, generator=g) * scale + offset).contiguous()


def ref_kernel(data):
    return data.double().cumsum(0).float()


def _expected(data):
    return ref_kernel(data), data.double().abs().cumsum(0)


def _compare(expected, output):
    want, abs_scan = expected
    reasons = kbutils.verbose_allclose(output, want, rtol=0, atol=float("inf"))
    if reasons:
        return False, "\n".join(reasons)
    err = (output.double() - want.double()).abs()
    tol = 1e-5 * abs_scan + 1e-6
    bad = ~(err <= tol)
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        return False, (f"{int(bad.sum())} of {want.numel()} elements are off; first at {i}: got "
                       f"{float(output[i]):.7g}, expected {float(want[i]):.7g}, allowed error {float(tol[i]):.3g}")
    return True, ""


check_implementation = kbutils.make_checker(_expected, _compare)
