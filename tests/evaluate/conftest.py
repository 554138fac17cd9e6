"""Fixtures shared by the evaluation tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kforge_bot.evaluate import bytecode
from kforge_bot.evaluate.sandbox import scrubbed_environment


@pytest.fixture(scope="session")
def bytecode_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bytecode cache filled as the bot fills it (once for the session: it imports torch from source)."""
    directory = tmp_path_factory.mktemp("bytecode")
    bytecode.prime(directory, scrubbed_environment())
    return directory


@pytest.fixture
def workers_use_bytecode_cache(bytecode_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Sandboxed workers get the cache, as on an installation without bytecode (this one has its own)."""
    monkeypatch.setenv("KFORGE_BYTECODE", "on")
    monkeypatch.setenv("KFORGE_BYTECODE_DIR", str(bytecode_cache))
    bytecode.reset()
    yield bytecode_cache
    bytecode.reset()
