# kernelbox: requires cuda
# Triton starting point: per-block partial sums, then a second pass.
import torch
import triton
import triton.language as tl


@triton.jit
def partial_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(x, axis=0))


def custom_kernel(data):
    x = data
    BLOCK = 4096
    while x.numel() > 1:
        n = x.numel()
        parts = torch.empty(triton.cdiv(n, BLOCK), device=x.device, dtype=torch.float32)
        partial_sum_kernel[(parts.numel(),)](x, parts, n, BLOCK=BLOCK)
        x = parts
    return x.reshape(())
