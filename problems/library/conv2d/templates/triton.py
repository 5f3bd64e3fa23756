# kernelbox: requires cuda
# Triton starting point: direct convolution, one program per block of outputs.
import torch
import triton
import triton.language as tl


@triton.jit
def conv_kernel(x_ptr, w_ptr, y_ptr, total, C, H, O, OH, KS, stride, pad, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < total
    ow = idx % OH
    oh = (idx // OH) % OH
    o = (idx // (OH * OH)) % O
    n = idx // (OH * OH * O)
    acc = tl.zeros((BLOCK,), tl.float32)
    for c in range(0, C):
        for kh in range(0, KS):
            for kw in range(0, KS):
                ih = oh * stride - pad + kh
                iw = ow * stride - pad + kw
                ok = mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < H)
                xv = tl.load(x_ptr + ((n * C + c) * H + ih) * H + iw, mask=ok, other=0.0)
                wv = tl.load(w_ptr + ((o * C + c) * KS + kh) * KS + kw, mask=mask, other=0.0)
                acc += xv * wv
    tl.store(y_ptr + idx, acc, mask=mask)


def custom_kernel(data):
    x, w, stride, padding = data
    N, C, H, _ = x.shape
    O, _, KS, _ = w.shape
    OH = (H + 2 * padding - KS) // stride + 1
    y = torch.empty(N, O, OH, OH, device=x.device, dtype=x.dtype)
    total = y.numel()
    conv_kernel[(triton.cdiv(total, 256),)](x, w, y, total, C, H, O, OH, KS, stride, padding, BLOCK=256)
    return y
