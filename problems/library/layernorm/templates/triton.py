# kernelbox: requires cuda
# Triton starting point: one program per row, two passes over the row.
import torch
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * hidden
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < hidden, other=0.0)
    mean = tl.sum(acc, axis=0) / hidden
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < hidden, other=0.0)
        d = tl.where(offs < hidden, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < hidden
        x = tl.load(base + offs, mask=m, other=0.0)
        w = tl.load(w_ptr + offs, mask=m, other=0.0)
        b = tl.load(b_ptr + offs, mask=m, other=0.0)
        tl.store(out_ptr + row * hidden + offs, (x - mean) * rstd * w + b, mask=m)


def custom_kernel(data):
    x, weight, bias = data
    x = x.contiguous()
    tokens, hidden = x.shape
    out = torch.empty_like(x)
    layernorm_kernel[(tokens,)](x, weight, bias, out, hidden, 1e-5, BLOCK=1024)
    return out
