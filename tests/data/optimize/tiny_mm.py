"""A tiny CPU kernel for the optimize tests: relu(a @ w + bias) in C, built with the system compiler.

Its tunables are real: THREADS shares the row tiles among cores, the tiles decide vectorization and
cache reuse. The values below are deliberately poor: TILE_N = 64 runs about twice as fast on one core
as 32 (gcc -O2, x86-64), which holds on a busy machine too, and the marker makes the tuner try it first.
A compiler failure raises with the compiler's own message, which is what the generator needs to see.
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
TILE_N = 32  # kforge: tune TILE_N in [32, 64]
THREADS = 1

C_SOURCE = r"""
#define TILE_M %(TILE_M)d
#define TILE_N %(TILE_N)d

void mm_bias_relu(const float* a, const float* w, const float* bias, float* out, int M, int N, int K, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int i0 = 0; i0 < M; i0 += TILE_M) {
        float acc[TILE_M][TILE_N];
        for (int j0 = 0; j0 < N; j0 += TILE_N) {
            int im = (M - i0) < TILE_M ? (M - i0) : TILE_M;
            int jn = (N - j0) < TILE_N ? (N - j0) : TILE_N;
            for (int i = 0; i < im; ++i)
                for (int j = 0; j < jn; ++j) acc[i][j] = 0.0f;
            for (int k = 0; k < K; ++k)
                for (int i = 0; i < im; ++i) {
                    float av = a[(long)(i0 + i) * K + k];
                    const float* wrow = w + (long)k * N + j0;
                    for (int j = 0; j < jn; ++j) acc[i][j] += av * wrow[j];
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
    source = C_SOURCE % {"TILE_M": TILE_M, "TILE_N": TILE_N}
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"kforge-test-cbuild-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    lib = folder / f"tiny_mm_{digest}.so"
    if not lib.exists():
        src = folder / f"tiny_mm_{digest}.c"
        src.write_text(source)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        proc = subprocess.run([os.environ.get("CC", "cc"), "-O2", "-fopenmp", "-shared", "-fPIC", str(src), "-o", str(tmp)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError("C compilation failed:\n" + proc.stderr)
        tmp.replace(lib)
    handle = ctypes.CDLL(str(lib))
    handle.mm_bias_relu.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 4
    handle.mm_bias_relu.restype = None
    return handle


_LIB = _build()


def mm_bias_relu(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    a, w, bias = a.contiguous(), w.contiguous(), bias.contiguous()
    M, K = a.shape
    N = w.shape[1]
    out = torch.empty(M, N, dtype=torch.float32)
    _LIB.mm_bias_relu(a.data_ptr(), w.data_ptr(), bias.data_ptr(), out.data_ptr(), M, N, K, THREADS)
    return out


def reference(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.relu(a @ w + bias)


def make_inputs(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(m, k), torch.randn(k, n) / k**0.5, torch.randn(n)
