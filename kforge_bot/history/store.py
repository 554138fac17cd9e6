"""The history, kept in the repository on a ref of its own (refs/kforge/history), never on a branch anyone builds.

Layout, asv's: `results/<runner>/<commit>.json` (one file per commit and runner, the runs measured there),
`runners/<runner>.json` (the machine's facts), `acks/<id>.json` (one file per acknowledgement). Every write is one
commit on the ref's tip; with a remote, a push that a concurrent writer beat (not a fast-forward any more) is
retried on the fetched tip, never forced: two runners tracking at once both land.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_bot import gitops
from kforge_bot.config import reader
from kforge_bot.errors import KforgeError

HISTORY_REF = "refs/kforge/history"
ATTEMPTS = 5

Files = dict[str, Any]  # repository path on the ref -> parsed JSON


@dataclass(frozen=True)
class Store:
    """The history of the repository at `root`; `remote` (e.g. origin) is where it is shared, None: local only."""

    root: Path
    remote: str | None = None
    ref: str = HISTORY_REF

    def fetch(self) -> None:
        """The remote's history into the local ref (where the remote has one)."""
        if self.remote is None:
            return
        listed = gitops.run_git(self.root, "ls-remote", self.remote, self.ref, what=f"cannot list {self.remote}")
        if listed.strip():
            gitops.run_git(self.root, "fetch", "--no-tags", "--quiet", self.remote, f"+{self.ref}:{self.ref}",
                           what=f"cannot fetch {self.ref} from {self.remote}")

    def read(self) -> Files:
        """Every JSON file on the ref (empty before the first record)."""
        tip = gitops.ref_sha(self.root, self.ref)
        if tip is None:
            return {}
        out: Files = {}
        with tempfile.TemporaryDirectory(prefix="kforge-history-") as tmp:
            gitops.export_tree(self.root, tip, Path(tmp), lambda name: name.endswith(".json"))
            for path in sorted(Path(tmp).rglob("*.json")):
                rel = path.relative_to(tmp).as_posix()
                try:
                    out[rel] = json.loads(reader.read_text(path, tmp))
                except json.JSONDecodeError as exc:
                    raise KforgeError(f"the history holds a file that is not JSON: {rel} ({exc})",
                                      hint=f"fix or delete it on {self.ref}") from None
        return out

    def update(self, change: Callable[[Files], Mapping[str, Any]], message: str) -> str:
        """Apply `change` (the current files -> the files to write) as one commit on the ref, and share it; on a
        concurrent push, fetch and apply it again on the new tip. The new tip's sha."""
        self.fetch()
        for _ in range(ATTEMPTS):
            tip = gitops.ref_sha(self.root, self.ref)
            files = {path: json.dumps(data, indent=1, sort_keys=True) + "\n"
                     for path, data in change(self.read()).items()}
            new = gitops.commit_files(self.root, tip, files, message)
            if self._publish(new, tip):
                return new
            self.fetch()  # someone else's record landed first: ours goes on top of it
        raise KforgeError(f"could not append to {self.ref}: {ATTEMPTS} concurrent pushes in a row beat this one",
                          hint="run the command again")

    def _publish(self, new: str, old: str | None) -> bool:
        """Move the ref from `old` to `new` here and on the remote; False when another writer moved it first."""
        if self.remote is not None:
            if not _push(self.root, self.remote, new, self.ref):
                return False
            gitops.run_git(self.root, "update-ref", self.ref, new, what=f"cannot move {self.ref}")
            return True
        try:  # local only: a compare-and-swap, so two processes here cannot lose a record either
            gitops.run_git(self.root, "update-ref", self.ref, new, old or "0" * 40, what=f"cannot move {self.ref}")
        except KforgeError:
            return False
        return True


def _push(root: Path, remote: str, new: str, ref: str) -> bool:
    """Push `new` to the remote's `ref`, as a fast-forward only; False when the remote rejected it."""
    try:
        out = gitops.run_git(root, "push", "--porcelain", remote, f"{new}:{ref}",
                             what=f"cannot push {ref} to {remote}")
    except KforgeError as exc:
        if "rejected" in str(exc) or "fetch first" in str(exc) or "non-fast-forward" in str(exc):
            return False
        raise
    rows = [line.split("\t") for line in out.splitlines() if line.count("\t") >= 2]
    return bool(rows) and all(r[0].strip() != "!" for r in rows if r[1].endswith(f":{ref}"))
