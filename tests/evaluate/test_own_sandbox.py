"""The forked worker's sandbox reads bwrap's argument list, the one place a view is decided, and refuses what it
does not make exactly (evaluate.worker.own_sandbox). Its walls are attacked in tests/evaluate/test_isolation.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_bot.evaluate import isolation
from kforge_bot.evaluate.worker.own_sandbox import SandboxError, read_arguments


def test_a_views_arguments_become_its_steps_in_order(tmp_path: Path) -> None:
    readable = tmp_path / "kernels"
    (readable / ".git").mkdir(parents=True)
    view = isolation.View(scratch=tmp_path / "scratch", readable=(readable,))
    args = isolation.command(["python"], view, bwrap="/usr/bin/bwrap")
    layout = read_arguments(args)
    assert layout.hostname == "kforge-sandbox"
    assert layout.chdir == str((tmp_path / "scratch").resolve())
    kinds = [step[0] for step in layout.steps]
    assert "proc" in kinds and "dev" in kinds
    binds = {step[2]: step[3] for step in layout.steps if step[0] == "bind"}
    assert binds["/usr"] == "ro" and binds[str(readable.resolve())] == "ro"
    assert binds[str((tmp_path / "scratch").resolve())] == "rw"
    # The .git inside a readable folder is covered after that folder is bound (the order is bwrap's).
    cover = kinds.index("tmpfs")
    assert layout.steps[cover][1] == str((readable / ".git").resolve())
    assert layout.steps[cover + 1] == ("remount-ro", str((readable / ".git").resolve()))
    assert [s[2] for s in layout.steps if s[0] == "bind"].index(str(readable.resolve())) < \
        [s[1] for s in layout.steps].index(str((readable / ".git").resolve()))


@pytest.mark.parametrize("change, said", [
    (lambda a: a[:1] + ["--share-net"] + a[1:], "--share-net"),
    (lambda a: [x for x in a if x != "--unshare-all"], "--unshare-all"),
    (lambda a: [x if x != "ALL" else "CAP_NET_RAW" for x in a], "--cap-drop ALL"),
    (lambda a: [x for x in a if x != "--die-with-parent"], "--die-with-parent"),
])
def test_an_option_it_does_not_make_exactly_is_refused(tmp_path: Path, change, said: str) -> None:
    args = isolation.command(["python"], isolation.View(scratch=tmp_path), bwrap="/usr/bin/bwrap")
    with pytest.raises(SandboxError, match=said):
        read_arguments(change(args))
