"""Shared test fixtures. GPU tests are marked `gpu` and skipped where no CUDA device exists."""

from __future__ import annotations

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device: none on this machine (GPU tests run on the H200, see benchmarks/)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
