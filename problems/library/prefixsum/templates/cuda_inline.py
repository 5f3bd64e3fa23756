# kernelbox: requires cuda
# CUDA C++ through load_inline: a Hillis-Steele scan per block, then carries.
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#define B 1024
__global__ void block_scan(const float* x, float* out, float* totals, long n) {
    __shared__ float buf[B];
    long i = blockIdx.x * (long)B + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (int off = 1; off < B; off <<= 1) {
        float v = threadIdx.x >= off ? buf[threadIdx.x - off] : 0.f;
        __syncthreads();
        buf[threadIdx.x] += v;
        __syncthreads();
    }
    if (i < n) out[i] = buf[threadIdx.x];
    if (threadIdx.x == B - 1) totals[blockIdx.x] = buf[B - 1];
}

__global__ void add_carry(float* out, const float* carry, long n) {
    long i = blockIdx.x * (long)B + threadIdx.x;
    if (i < n) out[i] += carry[blockIdx.x];
}

torch::Tensor scan(torch::Tensor x) {
    long n = x.numel();
    long blocks = (n + B - 1) / B;
    auto out = torch::empty_like(x);
    auto totals = torch::empty({blocks}, x.options());
    block_scan<<<blocks, B>>>(x.data_ptr<float>(), out.data_ptr<float>(), totals.data_ptr<float>(), n);
    if (blocks > 1) {
        auto carry = totals.cumsum(0) - totals;
        add_carry<<<blocks, B>>>(out.data_ptr<float>(), carry.data_ptr<float>(), n);
    }
    return out;
}
"""
module = load_inline(name="kb_prefixsum", cpp_sources="torch::Tensor scan(torch::Tensor x);",
                     cuda_sources=cuda_src, functions=["scan"], extra_cuda_cflags=["-O3"])


def custom_kernel(data):
    return module.scan(data.contiguous())
