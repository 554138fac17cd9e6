"""Worker-side loading: each implementation sees its own repository's local modules."""

from __future__ import annotations

import sys
from pathlib import Path

from kforge_bot.evaluate.loading import import_implementation
from kforge_bot.spec import Implementation


def _repo(root: Path, value: int) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "helper.py").write_text(f"VALUE = {value}\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "deep.py").write_text(f"DEEP = {value * 10}\n")
    return root


KERNEL = "from helper import VALUE\nfrom pkg.deep import DEEP\n\ndef entry():\n    return VALUE, DEEP\n"


def test_base_and_head_checkouts_keep_their_own_helpers(tmp_path: Path) -> None:
    base = _repo(tmp_path / "base", 1)
    head = _repo(tmp_path / "head", 2)
    work = tmp_path / "work"
    first = import_implementation(Implementation(KERNEL, "entry", "k.py", str(base)), work, "baseline")
    second = import_implementation(Implementation(KERNEL + "# head\n", "entry", "k.py", str(head)), work, "candidate")
    again = import_implementation(Implementation(KERNEL + "# again\n", "entry", "k.py", str(base)), work, "reference")
    assert first.entry() == (1, 10)
    assert second.entry() == (2, 20)
    assert again.entry() == (1, 10)
    # Nothing local stays registered to shadow the next import.
    assert "helper" not in sys.modules and "pkg.deep" not in sys.modules
