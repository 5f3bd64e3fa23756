#include "task.h"

__global__ void copy_kernel(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}

void custom_kernel(const float* in, float* out, int n) {
    copy_kernel<<<(n + 255) / 256, 256>>>(in, out, n);
}
