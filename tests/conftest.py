"""Shared test fixtures. GPU tests are marked `gpu` and skipped where no CUDA device exists."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

OPTIMIZE_FIXTURE = Path(__file__).parent / "data" / "optimize"


@pytest.fixture
def kernel_dir(tmp_path: Path) -> Path:
    """A copy of the optimize fixture (a CPU matmul with tunables), free to be rewritten by a run."""
    folder = tmp_path / "kernels"
    shutil.copytree(OPTIMIZE_FIXTURE, folder)
    return folder


@pytest.fixture
def recorded_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KFORGE_NCU is a stand-in printing ncu's output recorded on an H200, and the CPU target stands in for
    CUDA (the collector's plumbing is the same)."""
    from fakes.ncu import printing_the_recording

    from kforge_bot.evaluate import ncu

    monkeypatch.setenv("KFORGE_NCU", str(printing_the_recording(tmp_path / "tool")))
    monkeypatch.setattr(ncu, "unavailable", lambda target: None)


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
