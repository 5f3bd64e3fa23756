# kernelbox: requires cuda
# CUDA C++ through load_inline: one thread per pixel.
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void gray_kernel(const float* img, float* out, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = 0.2989f * img[3 * i] + 0.5870f * img[3 * i + 1] + 0.1140f * img[3 * i + 2];
}

torch::Tensor grayscale(torch::Tensor img) {
    auto out = torch::empty({img.size(0), img.size(1)}, img.options());
    long n = img.size(0) * img.size(1);
    int threads = 256;
    gray_kernel<<<(n + threads - 1) / threads, threads>>>(img.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
module = load_inline(name="kb_grayscale", cpp_sources="torch::Tensor grayscale(torch::Tensor img);",
                     cuda_sources=cuda_src, functions=["grayscale"], extra_cuda_cflags=["-O3"])


def custom_kernel(data):
    return module.grayscale(data.contiguous())
