# kernelbox: requires cuda
# CUDA C++ through load_inline: one output per thread, int32 accumulation.
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cuda_bf16.h>
__global__ void w8a8_kernel(const signed char* A, const signed char* W, const float* sa, const float* sw,
                            __nv_bfloat16* C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    int acc = 0;
    for (int k = 0; k < K; ++k) acc += (int)A[(long)row * K + k] * (int)W[(long)col * K + k];
    C[(long)row * N + col] = __float2bfloat16((float)acc * sa[row] * sw[col]);
}

torch::Tensor w8a8(torch::Tensor a, torch::Tensor w, torch::Tensor sa, torch::Tensor sw) {
    int M = a.size(0), K = a.size(1), N = w.size(0);
    auto c = torch::empty({M, N}, sa.options().dtype(torch::kBFloat16));
    dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
    w8a8_kernel<<<grid, block>>>(a.data_ptr<signed char>(), w.data_ptr<signed char>(), sa.data_ptr<float>(),
                                 sw.data_ptr<float>(), reinterpret_cast<__nv_bfloat16*>(c.data_ptr<at::BFloat16>()), M, N, K);
    return c;
}
"""
module = load_inline(name="kb_int8_gemm",
                     cpp_sources="torch::Tensor w8a8(torch::Tensor a, torch::Tensor w, torch::Tensor sa, torch::Tensor sw);",
                     cuda_sources=cuda_src, functions=["w8a8"], extra_cuda_cflags=["-O3"])


def custom_kernel(data):
    a, w, scale_a, scale_w = data
    return module.w8a8(a.contiguous(), w.contiguous(), scale_a.contiguous(), scale_w.contiguous())
