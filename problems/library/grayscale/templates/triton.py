# kernelbox: requires cuda
# Triton starting point: one program per block of pixels.
import torch
import triton
import triton.language as tl


@triton.jit
def gray_kernel(img_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    r = tl.load(img_ptr + offs * 3, mask=mask)
    g = tl.load(img_ptr + offs * 3 + 1, mask=mask)
    b = tl.load(img_ptr + offs * 3 + 2, mask=mask)
    tl.store(out_ptr + offs, 0.2989 * r + 0.5870 * g + 0.1140 * b, mask=mask)


def custom_kernel(data):
    data = data.contiguous()
    h, w, _ = data.shape
    out = torch.empty(h, w, device=data.device, dtype=data.dtype)
    n = h * w
    gray_kernel[(triton.cdiv(n, 1024),)](data, out, n, BLOCK=1024)
    return out
