# kernelbox: requires cuda
# Triton starting point: atomic increments into the global histogram.
import torch
import triton
import triton.language as tl


@triton.jit
def hist_kernel(x_ptr, h_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask, other=0).to(tl.int32)
    tl.atomic_add(h_ptr + v, 1, mask=mask)


def custom_kernel(data):
    h = torch.zeros(256, device=data.device, dtype=torch.int32)
    n = data.numel()
    hist_kernel[(triton.cdiv(n, 1024),)](data, h, n, BLOCK=1024)
    return h
