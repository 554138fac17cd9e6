"""A GPU MODE problem is read through the one reader (issue 38): its task.yml is bounded YAML, every `files:` entry
a regular file inside the checkout, its folder's name a safe name. Each attack here got through before."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import load_spec
from kforge_bot.kernelspec.gpumode import load_gpumode

GM = Path(__file__).parents[1] / "data" / "gpumode"

# Nested aliases in under 600 bytes (the file had 568): 9**10 (3.5 billion) strings once walked.
ALIAS_BOMB = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
                       + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]) + "\n"


def _checkout(tmp_path: Path) -> Path:
    """A working tree (its `.git` marks it) holding the test problems (`gm/scaled_add_py`, `gm/utils.py`): the
    boundary a problem loaded from it may not leave."""
    root = tmp_path / "repo"
    shutil.copytree(GM, root / "gm", ignore=shutil.ignore_patterns("candidates"))
    (root / ".git").mkdir()
    return root


def _with_files_entry(problem: Path, source: str) -> None:
    task = problem / "task.yml"
    task.write_text(task.read_text().replace('"source": "../utils.py"', f'"source": "{source}"'))


@pytest.mark.parametrize("source", ["../" * 30 + "proc/self/environ", "../../../outside.py", "env", "outside_link"])
def test_a_files_entry_never_leaves_the_checkout(tmp_path: Path, source: str) -> None:
    root = _checkout(tmp_path)
    problem = root / "gm" / "scaled_add_py"
    (tmp_path / "outside.py").write_text("SECRET = 'canary-77'\n")
    (problem / "env").symlink_to("/proc/self/environ")
    (problem / "outside_link").symlink_to(tmp_path / "outside.py")
    _with_files_entry(problem, source)
    with pytest.raises(KforgeError) as caught:
        load_spec(problem)
    text = str(caught.value)
    assert "files[2].source" in text and "resolves outside the checkout" in text and "\n" not in text, text
    assert "canary-77" not in text


def test_the_problems_shared_utils_one_folder_up_still_loads(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    spec = load_spec(root / "gm" / "scaled_add_py")
    assert dict(spec.support)["utils.py"] == (root / "gm" / "utils.py").read_text()


def test_a_files_entry_naming_a_device_is_not_read(tmp_path: Path) -> None:
    """`/dev/zero` by a link inside the checkout's own /dev-like folder would be outside it; a link made inside the
    checkout to a device is refused as outside, and a device the checkout itself held would be refused as no
    regular file (both end before one byte is read)."""
    root = _checkout(tmp_path)
    problem = root / "gm" / "scaled_add_py"
    (problem / "zero.py").symlink_to("/dev/zero")
    _with_files_entry(problem, "zero.py")
    with pytest.raises(KforgeError, match="resolves outside the checkout"):
        load_spec(problem)
    _with_files_entry(problem, "/dev/zero")  # an absolute path: refused before any read
    with pytest.raises(KforgeError, match="must be relative|resolves outside"):
        load_spec(problem)
    with pytest.raises(KforgeError, match="not a regular file"):
        load_gpumode(problem, Path("/"))  # even where / were the checkout, a device is never read


def test_a_task_yml_alias_bomb_is_refused_as_it_is_parsed(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    problem = root / "gm" / "scaled_add_py"
    task = problem / "task.yml"
    task.write_text(ALIAS_BOMB + task.read_text())
    assert len(ALIAS_BOMB) < 600
    with pytest.raises(KforgeError, match="anchors"):
        load_spec(problem)


@pytest.mark.parametrize("name", ["[x](evil.example)", "![i](e.png)", "@octo-org", "a b", "x`y"])
def test_a_problem_folder_name_must_be_a_safe_name(tmp_path: Path, name: str) -> None:
    root = _checkout(tmp_path)
    shutil.copytree(root / "gm" / "scaled_add_py", root / "gm" / name)
    with pytest.raises(KforgeError, match="problem folder's name .* is not allowed"):
        load_spec(root / "gm" / name)


def test_counts_are_capped_as_a_manifest_s_are(tmp_path: Path) -> None:
    """Red-team (issue 38): a task.yml of a hundred keyword sets (each run, checked and timed), or of a hundred
    `files:` entries naming one 8 MiB file (each read whole on the host), is refused in one line."""
    root = _checkout(tmp_path)
    problem = root / "gm" / "scaled_add_py"
    task = problem / "task.yml"
    original = task.read_text()
    task.write_text(original.replace('tests:\n', "tests:\n" + '  - {"size": 8, "seed": 1}\n' * 100))
    with pytest.raises(KforgeError, match="keyword sets, at most 64"):
        load_spec(problem)
    many = "".join(f'  - {{"name": "m{i}.py", "source": "task.py"}}\n' for i in range(100))
    task.write_text(original.replace("files:\n", "files:\n" + many))
    with pytest.raises(KforgeError, match="files: 10[0-9] entries, at most 16"):
        load_spec(problem)
