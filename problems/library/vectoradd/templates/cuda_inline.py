# kernelbox: requires cuda
# CUDA C++ through torch.utils.cpp_extension.load_inline (needs a GPU and nvcc).
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cuda_fp16.h>

__global__ void add_kernel(const __half* a, const __half* b, __half* out, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = __hadd(a[i], b[i]);
}

torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    long n = a.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    add_kernel<<<blocks, threads>>>(
        reinterpret_cast<const __half*>(a.data_ptr<at::Half>()),
        reinterpret_cast<const __half*>(b.data_ptr<at::Half>()),
        reinterpret_cast<__half*>(out.data_ptr<at::Half>()), n);
    return out;
}
"""
cpp_src = "torch::Tensor add(torch::Tensor a, torch::Tensor b);"

module = load_inline(name="kb_vectoradd", cpp_sources=cpp_src, cuda_sources=cuda_src,
                     functions=["add"], extra_cuda_cflags=["-O3"], verbose=False)


def custom_kernel(data):
    a, b = data
    return module.add(a.contiguous(), b.contiguous())
