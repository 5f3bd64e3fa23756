# kernelbox: requires cuda
# CUDA C++ through load_inline: a private histogram per block in shared memory.
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void hist_kernel(const unsigned char* x, int* h, long n) {
    __shared__ int local[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
    __syncthreads();
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        atomicAdd(&local[x[i]], 1);
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x) atomicAdd(&h[i], local[i]);
}

torch::Tensor histogram(torch::Tensor x) {
    auto h = torch::zeros({256}, x.options().dtype(torch::kInt32));
    long n = x.numel();
    long blocks = (n + 255) / 256;
    if (blocks > 2048) blocks = 2048;
    if (blocks < 1) blocks = 1;
    hist_kernel<<<blocks, 256>>>(x.data_ptr<unsigned char>(), h.data_ptr<int>(), n);
    return h;
}
"""
module = load_inline(name="kb_histogram", cpp_sources="torch::Tensor histogram(torch::Tensor x);",
                     cuda_sources=cuda_src, functions=["histogram"], extra_cuda_cflags=["-O3"])


def custom_kernel(data):
    return module.histogram(data.contiguous())
