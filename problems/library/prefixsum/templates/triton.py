# kernelbox: requires cuda
# Triton starting point: scan each block, scan the block totals, add them back.
import torch
import triton
import triton.language as tl


@triton.jit
def block_scan_kernel(x_ptr, out_ptr, totals_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    s = tl.cumsum(x, axis=0)
    tl.store(out_ptr + offs, s, mask=offs < n)
    tl.store(totals_ptr + pid, tl.sum(x, axis=0))


@triton.jit
def add_carry_kernel(out_ptr, carry_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    c = tl.load(carry_ptr + pid)
    v = tl.load(out_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, v + c, mask=offs < n)


def custom_kernel(data):
    n = data.numel()
    BLOCK = 1024
    nblocks = triton.cdiv(n, BLOCK)
    out = torch.empty_like(data)
    totals = torch.empty(nblocks, device=data.device, dtype=torch.float32)
    block_scan_kernel[(nblocks,)](data, out, totals, n, BLOCK=BLOCK)
    if nblocks > 1:
        carry = torch.cumsum(totals, 0) - totals  # exclusive scan of block totals
        add_carry_kernel[(nblocks,)](out, carry, n, BLOCK=BLOCK)
    return out
