"""Which of a repository's Python files `kforge-bot init` reads (kforge_bot.init.files)."""

from __future__ import annotations

from pathlib import Path

from kforge_bot.init.files import python_files


def test_folders_that_hold_no_library_are_never_entered(tmp_path: Path) -> None:
    """Vendored code, docs and applications beside a library are never read (nor a hidden folder, nor a virtual
    environment)."""
    for folder in ("lib", "_vendor", "vendored", "third_party", "docs", "apps", ".hidden", "site-packages"):
        (tmp_path / "pkg" / folder).mkdir(parents=True)
        (tmp_path / "pkg" / folder / "mod.py").write_text("x = 1\n")
    read = {p.relative_to(tmp_path).as_posix() for p in python_files(tmp_path)}
    assert read == {"pkg/lib/mod.py"}
