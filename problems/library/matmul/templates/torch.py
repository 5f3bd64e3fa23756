# PyTorch starting point: correct, and the baseline to beat.
import torch


def custom_kernel(data):
    a, b = data
    if not a.is_cuda:
        # PyTorch's bf16 matmul on CPUs without AVX-512 sums in bf16, which
        # misses the reference's tolerance; on the CPU backend, sum in fp32.
        return (a.float() @ b.float()).to(a.dtype)
    return torch.matmul(a, b)
