"""RMSNorm in CUDA C++, built with torch.utils.cpp_extension.load_inline. THREADS is the block size."""

from __future__ import annotations

import torch
from torch.utils.cpp_extension import load_inline

THREADS = 64
EPS = 1e-6

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_bf16.h>

__global__ void rmsnorm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                               __nv_bfloat16* __restrict__ out, int cols, float eps) {
    extern __shared__ float partial[];
    const __nv_bfloat16* row = x + (long)blockIdx.x * cols;
    __nv_bfloat16* orow = out + (long)blockIdx.x * cols;
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = __bfloat162float(row[c]);
        sum += v * v;
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    float inv = rsqrtf(partial[0] / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        orow[c] = __float2bfloat16(__bfloat162float(row[c]) * inv * __bfloat162float(w[c]));
}

torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, int64_t threads, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kBFloat16 && x.is_contiguous(), "x: contiguous bf16 CUDA");
    auto out = torch::empty_like(x);
    int rows = x.size(0), cols = x.size(1);
    rmsnorm_kernel<<<rows, threads, threads * sizeof(float)>>>(
        reinterpret_cast<const __nv_bfloat16*>(x.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(w.data_ptr()),
        reinterpret_cast<__nv_bfloat16*>(out.data_ptr()), cols, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
CPP_SOURCE = "torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, int64_t threads, double eps);"

_ext = load_inline(name="kforge_example_rmsnorm", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                   functions=["rmsnorm"], extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
                   extra_include_paths=[], verbose=False)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _ext.rmsnorm(x.contiguous(), weight.contiguous(), THREADS, EPS)


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()).to(x.dtype)


def make_inputs(rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(rows, cols, dtype=torch.bfloat16), (1.0 + 0.1 * torch.randn(cols)).to(torch.bfloat16)
