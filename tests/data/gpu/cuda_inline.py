import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
__global__ void axpb_kernel(const float* x, float* y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * 2.0f + 1.0f;
}
torch::Tensor axpb(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    axpb_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
_ext = load_inline(name="kforge_test_axpb", cpp_sources="torch::Tensor axpb(torch::Tensor x);",
                   cuda_sources=_SRC, functions=["axpb"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.axpb(x.contiguous())
