# kernelbox: requires cuda
# Triton starting point: one program per row, online max and sum over chunks.
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * cols
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < cols, other=float("-inf"))
        new_m = tl.maximum(m, x)
        s = s * tl.exp(m - new_m) + tl.exp(x - new_m)
        s = tl.where(new_m == float("-inf"), 0.0, s)
        m = new_m
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < cols, other=float("-inf"))
        tl.store(out_ptr + row * cols + offs, tl.exp(x - row_max) / total, mask=offs < cols)


def custom_kernel(data):
    data = data.contiguous()
    rows, cols = data.shape
    out = torch.empty_like(data)
    softmax_kernel[(rows,)](data, out, cols, BLOCK=1024)
    return out
