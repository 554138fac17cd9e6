"""The history ref: created by the first write, appended to, shared through a remote, and a push that a concurrent
writer beat retried on the new tip (both records land, nothing forced)."""

from __future__ import annotations

from fakes.gitrepos import commit_all, git, write
from kforge_bot.history.store import HISTORY_REF, Store


def _repo(path):
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    write(path, "a.txt", "a\n")
    commit_all(path, "first")
    return path


def test_first_write_creates_the_ref_and_later_ones_append(tmp_path) -> None:
    root = _repo(tmp_path / "r")
    store = Store(root)
    assert store.read() == {}
    first = store.update(lambda files: {"results/x/1.json": {"n": 1}}, "one")
    second = store.update(lambda files: {"results/x/2.json": {"n": len(files) + 1}}, "two")
    assert store.read() == {"results/x/1.json": {"n": 1}, "results/x/2.json": {"n": 2}}
    assert git(root, "rev-parse", f"{second}^") == first
    assert git(root, "rev-parse", "HEAD") == git(root, "rev-parse", "main")  # the branch is untouched
    assert git(root, "status", "--porcelain") == ""


def test_a_push_beaten_by_a_concurrent_writer_is_retried_on_its_tip(tmp_path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    seed = _repo(tmp_path / "seed")
    git(seed, "push", "-q", str(origin), "main")
    one, two = tmp_path / "one", tmp_path / "two"
    git(tmp_path, "clone", "-q", str(origin), str(one))
    git(tmp_path, "clone", "-q", str(origin), str(two))
    Store(one, "origin").update(lambda files: {"results/a/1.json": {"who": "one"}}, "one, first")
    seen: list[list[str]] = []

    def two_writes(files):
        seen.append(sorted(files))
        if len(seen) == 1:  # runner one lands a record after two read the history, before two pushes
            Store(one, "origin").update(lambda f: {"results/a/2.json": {"who": "one"}}, "one, again")
        return {"results/b/1.json": {"who": "two"}}

    Store(two, "origin").update(two_writes, "two")
    assert seen == [["results/a/1.json"], ["results/a/1.json", "results/a/2.json"]]  # retried on the new tip
    reader = Store(one, "origin")
    reader.fetch()
    assert reader.read() == {"results/a/1.json": {"who": "one"}, "results/a/2.json": {"who": "one"},
                             "results/b/1.json": {"who": "two"}}
    assert git(origin, "rev-list", "--count", HISTORY_REF) == "3"  # three appends, none forced over another
