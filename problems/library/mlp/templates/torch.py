# PyTorch starting point: correct, and the baseline to beat.
import torch


def custom_kernel(data):
    x, w1, b1, w2, b2 = data
    if not x.is_cuda:
        # PyTorch's bf16 matmul on CPUs without AVX-512 sums in bf16, which
        # misses the reference's tolerance; on the CPU backend, sum in fp32.
        x, w1, b1, w2, b2 = (t.float() for t in data)
        h = torch.nn.functional.gelu(torch.addmm(b1, x, w1))
        return torch.addmm(b2, h, w2).to(data[0].dtype)
    h = torch.nn.functional.gelu(torch.addmm(b1, x, w1))
    return torch.addmm(b2, h, w2)
