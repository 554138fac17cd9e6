"""relu(a @ w + bias) in C, built with the system C compiler and called through ctypes.

A CPU kernel with real tunables: the tile sizes decide how well the working set fits the caches, and
THREADS how many cores share the row tiles. The values below are a plausible first try, not the best.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import torch

TILE_M = 8
TILE_N = 32
TILE_K = 16
THREADS = 1

C_SOURCE = r"""
#include <omp.h>
#define TILE_M %(TILE_M)d
#define TILE_N %(TILE_N)d
#define TILE_K %(TILE_K)d

void matmul_bias_relu(const float* a, const float* w, const float* bias, float* out,
                      int M, int N, int K, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int i0 = 0; i0 < M; i0 += TILE_M) {
        float acc[TILE_M][TILE_N];
        for (int j0 = 0; j0 < N; j0 += TILE_N) {
            int im = (M - i0) < TILE_M ? (M - i0) : TILE_M;
            int jn = (N - j0) < TILE_N ? (N - j0) : TILE_N;
            for (int i = 0; i < im; ++i)
                for (int j = 0; j < jn; ++j) acc[i][j] = 0.0f;
            for (int k0 = 0; k0 < K; k0 += TILE_K) {
                int kk = (K - k0) < TILE_K ? (K - k0) : TILE_K;
                for (int i = 0; i < im; ++i) {
                    const float* arow = a + (long)(i0 + i) * K + k0;
                    for (int k = 0; k < kk; ++k) {
                        float av = arow[k];
                        const float* wrow = w + (long)(k0 + k) * N + j0;
                        for (int j = 0; j < jn; ++j) acc[i][j] += av * wrow[j];
                    }
                }
            }
            for (int i = 0; i < im; ++i)
                for (int j = 0; j < jn; ++j) {
                    float v = acc[i][j] + bias[j0 + j];
                    out[(long)(i0 + i) * N + j0 + j] = v > 0.0f ? v : 0.0f;
                }
        }
    }
}
"""


def _build() -> ctypes.CDLL:
    source = C_SOURCE % {"TILE_M": TILE_M, "TILE_N": TILE_N, "TILE_K": TILE_K}
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"kforge-cbuild-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    lib = folder / f"matmul_bias_relu_{digest}.so"
    if not lib.exists():
        src = folder / f"matmul_bias_relu_{digest}.c"
        src.write_text(source)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        proc = subprocess.run([os.environ.get("CC", "cc"), "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC",
                               str(src), "-o", str(tmp)], capture_output=True, text=True)
        if proc.returncode != 0:  # the compiler's own words are what a generator can repair from
            raise RuntimeError(f"C compilation failed:\n{proc.stderr[-4000:]}")
        tmp.replace(lib)
    handle = ctypes.CDLL(str(lib))
    handle.matmul_bias_relu.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 4
    handle.matmul_bias_relu.restype = None
    return handle


_LIB = _build()


def matmul_bias_relu(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    a, w, bias = a.contiguous(), w.contiguous(), bias.contiguous()
    M, K = a.shape
    N = w.shape[1]
    out = torch.empty(M, N, dtype=torch.float32)
    _LIB.matmul_bias_relu(a.data_ptr(), w.data_ptr(), bias.data_ptr(), out.data_ptr(), M, N, K, THREADS)
    return out


def reference(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.relu(a @ w + bias)


def make_inputs(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(m, k), torch.randn(k, n) / k**0.5, torch.randn(n)
