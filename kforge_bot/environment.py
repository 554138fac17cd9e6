"""The environment every child process gets: the variables named below that the parent has, none that could be a
credential.

An allowlist, not the parent's environment minus a denylist: a runner holds secrets under any name
(`PIP_INDEX_URL` with a token in it, `SLACK_WEBHOOK_URL`, `SENTRY_DSN`, `DATABASE_URL`, `KAGGLE_KEY`), and a worker
runs a pull request's code. What is kept, and why:

- the system: PATH (compilers, ninja), HOME, USER and LOGNAME (tools that look themselves up), SHELL, TERM, TZ,
  TMPDIR, XDG_CACHE_HOME (the sandbox points it into its scratch), LANG, LANGUAGE and LC_* (the locale, which
  compilers' messages and Python's text encoding follow);
- the toolchains: CUDA_* (CUDA_VISIBLE_DEVICES chooses the device the lead gave this process; CUDA_HOME,
  CUDA_PATH, CUDA_CACHE_PATH, CUDA_LAUNCH_BLOCKING), NVIDIA_*, CC, CXX, CUDAHOSTCXX, NVCC_*, LD_LIBRARY_PATH,
  LIBRARY_PATH, CPATH, ROCM_PATH, HIP_*, HSA_*, ROCR_*, ONEAPI_*, SYCL_*, ZE_* (Level Zero's device selection),
  MAX_JOBS (how many compilers torch's extension builds run at once);
- the frameworks: TORCH_*, TORCHINDUCTOR_*, PYTORCH_*, TRITON_* (their caches and settings: the sandbox points
  the caches into its scratch), OMP_*, MKL_*, KMP_*, OPENBLAS_NUM_THREADS (how many threads a CPU kernel uses);
- Python: PYTHONPATH (rebuilt below), PYTHONHASHSEED, PYTHONPYCACHEPREFIX, VIRTUAL_ENV, CONDA_PREFIX;
- the harness's own settings: KFORGE_* (memory budget, outputs, extension folders, sandbox), but never the LLM's
  (KFORGE_LLM_*) nor the cache's signing key.

A kept name that still reads like a credential (`TORCH_HUB_TOKEN`, `KFORGE_CACHE_SECRET`) is dropped too.

A leaf (the sandbox, the result cache's device probe, the profilers and the doctor all start children with it),
so the leaves that start a process need not import the harness."""

from __future__ import annotations

import os
import re
from pathlib import Path

SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|COOKIE"
                         r"|SESSION|_KEY$|_DSN$|WEBHOOK|_URL$)", re.IGNORECASE)
SECRET_PREFIXES = ("GITHUB_", "ACTIONS_", "OPENAI_", "ANTHROPIC_", "AWS_", "AZURE_", "GOOGLE_", "GH_", "HF_",
                   "HUGGING_FACE_", "RUNNER_", "KFORGE_LLM_", "SSH_")
KEPT_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "XDG_CACHE_HOME", "LANG", "LANGUAGE",
    "CC", "CXX", "CUDAHOSTCXX", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "ROCM_PATH", "MAX_JOBS",
    "OPENBLAS_NUM_THREADS", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONPYCACHEPREFIX", "VIRTUAL_ENV", "CONDA_PREFIX",
})
KEPT_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "NVCC_", "HIP_", "HSA_", "ROCR_", "ONEAPI_", "SYCL_", "ZE_", "TORCH_",
                 "TORCHINDUCTOR_", "PYTORCH_", "TRITON_", "OMP_", "MKL_", "KMP_", "KFORGE_")


def kept(name: str) -> bool:
    """Whether a child process may see the variable `name` (see the module's docstring)."""
    allowed = name in KEPT_NAMES or name.startswith(KEPT_PREFIXES)
    return allowed and not SECRET_NAME.search(name) and not name.startswith(SECRET_PREFIXES)


def scrubbed_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables of the parent's environment that a child may see (`kept`), and Python's settings for it."""
    source = dict(os.environ if environ is None else environ)
    clean = {k: v for k, v in source.items() if kept(k)}
    clean["PYTHONUNBUFFERED"] = "1"
    clean["PYTHONDONTWRITEBYTECODE"] = "1"
    # The worker must import this kforge_bot even when it is not installed (tests, a checkout).
    package_root = str(Path(__file__).resolve().parents[1])
    clean["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, clean.get("PYTHONPATH", "")) if p)
    return clean
