# kernelbox: requires cuda
# CUDA C++ through load_inline: a tiled linear kernel with bias and optional
# GELU, launched twice; the hidden activation stays in float32.
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cuda_bf16.h>
#define T 16
template <typename In>
__device__ float ld(const In* p, long i);
template <> __device__ float ld<__nv_bfloat16>(const __nv_bfloat16* p, long i) { return __bfloat162float(p[i]); }
template <> __device__ float ld<float>(const float* p, long i) { return p[i]; }

template <typename In, typename Out>
__global__ void linear_kernel(const In* A, const __nv_bfloat16* B, const __nv_bfloat16* bias, Out* C,
                              int M, int N, int K, bool gelu) {
    __shared__ float As[T][T], Bs[T][T];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? ld<In>(A, (long)row * K + k0 + threadIdx.x) : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? __bfloat162float(B[(long)(k0 + threadIdx.y) * N + col]) : 0.f;
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) {
        acc += __bfloat162float(bias[col]);
        if (gelu) acc = 0.5f * acc * (1.f + erff(acc * 0.70710678f));
        if constexpr (sizeof(Out) == 4) C[(long)row * N + col] = acc;
        else C[(long)row * N + col] = __float2bfloat16(acc);
    }
}

#define BF(t) reinterpret_cast<const __nv_bfloat16*>(t.data_ptr<at::BFloat16>())
torch::Tensor mlp(torch::Tensor x, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2, torch::Tensor b2) {
    int M = x.size(0), D = x.size(1), F = w1.size(1);
    auto h = torch::empty({M, F}, x.options().dtype(torch::kFloat32));
    auto y = torch::empty({M, D}, x.options());
    dim3 block(T, T);
    linear_kernel<__nv_bfloat16, float><<<dim3((F + T - 1) / T, (M + T - 1) / T), block>>>(
        BF(x), BF(w1), BF(b1), h.data_ptr<float>(), M, F, D, true);
    linear_kernel<float, __nv_bfloat16><<<dim3((D + T - 1) / T, (M + T - 1) / T), block>>>(
        h.data_ptr<float>(), BF(w2), BF(b2), reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()), M, D, F, false);
    return y;
}
"""
module = load_inline(name="kb_mlp",
                     cpp_sources="torch::Tensor mlp(torch::Tensor x, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2, torch::Tensor b2);",
                     cuda_sources=cuda_src, functions=["mlp"], extra_cuda_cflags=["-O3", "-std=c++17"])


def custom_kernel(data):
    return module.mlp(*(t.contiguous() for t in data))
