"""The release artifacts: the wheel and the sdist build from a clean tree and carry what an install needs."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import kforge_bot

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return next(out.glob("*.whl")), next(out.glob("*.tar.gz"))


def test_the_wheel_carries_the_package_data_and_nothing_else(artifacts: tuple[Path, Path]) -> None:
    wheel, _ = artifacts
    version = kforge_bot.__version__
    assert wheel.name == f"kforge_bot-{version}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("kforge_bot/cli.py", "kforge_bot/commands/init.py", "kforge_bot/evaluate/wire/tensorfile.py",
                   "kforge_bot/data/policies/default.yml", "kforge_bot/data/policies/strict.yml",
                   "kforge_bot/data/runners/h200.yml"):
        assert needed in names, needed
    assert any(n.startswith("kforge_bot/agents/prompts/") and n.endswith(".md") for n in names)
    assert not [n for n in names if not n.startswith(("kforge_bot/", f"kforge_bot-{version}.dist-info/"))]
    metadata = zipfile.ZipFile(wheel).read(f"kforge_bot-{version}.dist-info/METADATA").decode()
    assert f"Version: {version}" in metadata and "License-Expression: Apache-2.0" in metadata
    entry_points = zipfile.ZipFile(wheel).read(f"kforge_bot-{version}.dist-info/entry_points.txt").decode()
    assert "kforge-bot = kforge_bot.cli:run" in entry_points


def test_the_sdist_has_the_license_the_readme_and_the_changelog(artifacts: tuple[Path, Path]) -> None:
    _, sdist = artifacts
    top = sdist.name.removesuffix(".tar.gz")
    names = set(tarfile.open(sdist).getnames())
    for needed in ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "kforge_bot/cli.py"):
        assert f"{top}/{needed}" in names, needed


def test_one_version_everywhere() -> None:
    """pyproject, the package and the changelog agree; the changelog's top section is Unreleased or this version."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^version = "(.+)"$', pyproject, re.MULTILINE).group(1) == kforge_bot.__version__
    first = re.search(r"^## \[(.+?)\]", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE).group(1)
    assert first in ("Unreleased", kforge_bot.__version__)
