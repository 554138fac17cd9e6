"""Tiled transpose on the CPU in C++, built with torch.utils.cpp_extension.load_inline."""

import torch
from torch.utils.cpp_extension import load_inline

NUM_THREADS = 4  # at::parallel_for is told how many threads to use

CPP_SOURCE = """
#include <torch/extension.h>
#include <ATen/Parallel.h>

constexpr int TILE = 32;  // kforge: tune TILE in [8, 16, 32, 64]

torch::Tensor transpose(torch::Tensor x, int64_t threads) {
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.scalar_type() == at::kFloat, "x: contiguous 2-D float");
    const int64_t rows = x.size(0), cols = x.size(1);
    auto out = torch::empty({cols, rows}, x.options());
    const float* __restrict__ src = x.data_ptr<float>();
    float* __restrict__ dst = out.data_ptr<float>();
    at::set_num_threads(threads);
    at::parallel_for(0, (rows + TILE - 1) / TILE, 1, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t)
            for (int64_t c0 = 0; c0 < cols; c0 += TILE)
                for (int64_t r = t * TILE; r < std::min(rows, (t + 1) * TILE); ++r)
                    for (int64_t c = c0; c < std::min(cols, c0 + TILE); ++c)
                        dst[c * rows + r] = src[r * cols + c];
    });
    return out;
}
"""

_mod = load_inline("kforge_tiled_transpose", cpp_sources=CPP_SOURCE, functions=["transpose"], extra_cflags=["-O3"])


def transpose(x: torch.Tensor) -> torch.Tensor:
    return _mod.transpose(x, NUM_THREADS)
