# kernelbox: requires cuda
# CUDA C++ through load_inline: block reduction in shared memory, then atomics.
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void sum_kernel(const float* x, float* out, long n) {
    __shared__ float buf[256];
    float acc = 0.f;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        acc += x[i];
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, buf[0]);
}

torch::Tensor vsum(torch::Tensor x) {
    auto out = torch::zeros({}, x.options());
    long n = x.numel();
    long blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    sum_kernel<<<blocks, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
module = load_inline(name="kb_vectorsum", cpp_sources="torch::Tensor vsum(torch::Tensor x);",
                     cuda_sources=cuda_src, functions=["vsum"], extra_cuda_cflags=["-O3"])


def custom_kernel(data):
    return module.vsum(data.contiguous())
