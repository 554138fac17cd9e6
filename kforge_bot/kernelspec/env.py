"""What a manifest's `env:` may set in its kernels' workers: an allowlist, never a blocklist.

A variable set before the library is imported can change far more than what the library imports: the loader
(`LD_PRELOAD`), Python (`PYTHONPATH`, `PYTHONWARNINGS` imports a module), the device a worker sees
(`CUDA_VISIBLE_DEVICES`), how fast both sides run (`TRITON_INTERPRET`, `CUDA_LAUNCH_BLOCKING`, `OMP_NUM_THREADS`,
`ATEN_CPU_CAPABILITY`), the numbers (`NVIDIA_TF32_OVERRIDE`), or the compilers a build runs (`CC`, `NVCC_PREPEND_FLAGS`,
`CPATH`). So a name is allowed only where it is the library's own setting:

- it starts with the prefix of a package the kernel lives in (`KWLIB_` for `kwlib.ops.act`), or
- it starts with a prefix a library documents for its settings (`GEMS_`, `FLAGGEMS_` for FlagGems), listed here by the
  package that reads it;

and, whatever the prefix, it is none of the runtime's own (RESERVED_PREFIXES: a package named `ld` or `torch_ext`
gets no `LD_` or `TORCH_` names). Values are plain, printable and short. Like every key but the kernel's code, the
gate takes `env:` from the base branch's manifest (gate.base_spec).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kforge_bot.errors import KforgeError

NAME_RE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
MAX_VALUE = 256
# Setting prefixes libraries document for themselves, by the top-level package that reads them.
DOCUMENTED_PREFIXES: dict[str, tuple[str, ...]] = {
    "flag_gems": ("GEMS_", "FLAGGEMS_"),  # GEMS_VENDOR, FLAGGEMS_ENABLE_DISK_CACHE, ...
    "liger_kernel": ("LIGER_",),  # LIGER_KERNEL_IMPL, LIGER_RMS_* tuning switches
}
# Never settable, whatever package prefix a name also has: the loader, libc, Python, torch and its math libraries,
# Triton, CUDA and other vendors' runtimes, compilers and their search paths, shells, git, network and the bot itself.
RESERVED_PREFIXES = (
    "LD_", "DYLD", "GCONV", "LOCPATH", "NLSPATH", "HOSTALIASES", "RES_OPTIONS", "MALLOC", "GLIBC", "LANG", "LC_",
    "TZ", "PATH", "HOME", "USER", "SHELL", "BASH", "ENV", "IFS", "PS4", "TMP", "TEMP", "XDG_",
    "PYTHON", "PIP_", "VIRTUAL_ENV", "CONDA", "TORCH", "PYTORCH", "ATEN_", "CAFFE2", "TRITON", "CUDA", "CUBLAS",
    "CUDNN", "CUFFT", "CURAND", "CUSPARSE", "CUTLASS", "NVIDIA", "NVCC", "NV_", "NCCL", "NVTE_", "HIP", "ROCM", "ROCR",
    "HSA_", "AMD_", "XPU", "ZE_", "SYCL", "ONEAPI", "DNNL", "ONEDNN", "MKL", "KMP_", "OMP_", "GOMP", "OPENBLAS",
    "GOTO", "VECLIB", "BLIS", "NUMBA", "NUMEXPR", "JAX", "XLA", "TF_", "CC", "CXX", "CPP", "CPATH", "C_INCLUDE",
    "CPLUS_INCLUDE", "LIBRARY_PATH", "GCC", "CLANG", "LLVM", "CMAKE", "MAKE", "NINJA", "MAX_JOBS", "DISTUTILS",
    "SETUPTOOLS", "GIT", "SSH", "GPG", "SSL_", "CURL", "REQUESTS", "HTTP", "HTTPS", "FTP", "NO_PROXY", "ALL_PROXY",
    "HF_", "TRANSFORMERS", "KFORGE", "GITHUB", "RUNNER", "ACTIONS", "OPENAI", "BWRAP", "NODE_", "JAVA", "PERL", "RUBY",
    "MASTER_", "WORLD_SIZE", "RANK", "LOCAL_RANK",
)
DOCS = "docs/libraries.md (env)"


def package_prefix(package: str) -> str:
    """A package's own prefix: `kwlib` -> `KWLIB_`."""
    return package.upper() + "_"


def allowed_prefixes(packages: Iterable[str]) -> tuple[str, ...]:
    """The prefixes a kernel in `packages` (top-level package names) may set: their own, then those they document."""
    found: list[str] = []
    for package in sorted(set(packages)):
        for prefix in (package_prefix(package), *DOCUMENTED_PREFIXES.get(package, ())):
            if prefix not in found:
                found.append(prefix)
    return tuple(found)


def is_reserved(name: str) -> bool:
    return name.startswith(RESERVED_PREFIXES)


def check_env(value: Any, where: str, manifest: Path, packages: Iterable[str]) -> dict[str, str]:
    """`env:` as {name: value}, or a one-line KforgeError naming the manifest, the key and the fix."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise KforgeError(f"{where}.env: expected a mapping of variable names to values", path=manifest,
                          hint="e.g. env: {GEMS_VENDOR: nvidia}")
    prefixes = allowed_prefixes(packages)
    env: dict[str, str] = {}
    for name, raw in value.items():
        shown = ascii(name)[:66]
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise KforgeError(f"{where}.env: {shown} is not a variable name a manifest may set", path=manifest,
                              hint="upper-case letters, digits and _, at most 64; see " + DOCS)
        if is_reserved(name):
            raise KforgeError(f"{where}.env: {name} is the runtime's own (loader, Python, torch, Triton, CUDA, "
                              "compilers, threads or the bot read it), never a manifest's", path=manifest,
                              hint="remove it; a library's own settings start with its prefix, see " + DOCS)
        if not name.startswith(prefixes):
            allowed = ", ".join(f"{p}*" for p in prefixes) if prefixes else \
                "none: the kernel is in no package (import_roots, or an entry in a module)"
            raise KforgeError(f"{where}.env: {name} is not a setting of the kernel's library (allowed: {allowed})",
                              path=manifest, hint="set only the library's own variables; a library whose settings "
                                                  "lack its package's prefix is listed in kforge_bot/kernelspec/env.py "
                                                  "(DOCUMENTED_PREFIXES), see " + DOCS)
        text = str(raw).lower() if isinstance(raw, bool) else str(raw)
        if not isinstance(raw, (str, int, float, bool)) or len(text) > MAX_VALUE or not text.isprintable():
            raise KforgeError(f"{where}.env.{name}: expected a printable value of at most {MAX_VALUE} characters",
                              path=manifest)
        env[name] = text
    return env
