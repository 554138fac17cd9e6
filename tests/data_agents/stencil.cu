// 1-D 3-point stencil, a plain CUDA translation unit (built by the project's own CMake).
#include <cuda_runtime.h>
#include <cstdint>

#define RADIUS 1
#define ITEMS_PER_THREAD 2  // kforge: tune ITEMS_PER_THREAD in [1, 2, 4]
static constexpr int kUnused = 7;

__global__ void stencil(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
    int64_t base = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * ITEMS_PER_THREAD;
    for (int k = 0; k < ITEMS_PER_THREAD; ++k) {
        int64_t i = base + k;
        if (i >= RADIUS && i + RADIUS < n) out[i] = (in[i - 1] + in[i] + in[i + 1]) * (1.0f / 3.0f);
    }
}

void launch_stencil(const float* in, float* out, int64_t n, cudaStream_t stream) {
    const int64_t per_block = 128 * ITEMS_PER_THREAD;
    stencil<<<(unsigned)((n + per_block - 1) / per_block), 128, 0, stream>>>(in, out, n);
}
