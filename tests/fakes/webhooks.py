"""Real webhook payloads from @octokit/webhooks-examples (installed by `npm ci`), and small edits
of them for the cases the examples do not cover (a fork, a command comment on a PR)."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "node_modules"


def node_file(rel: str) -> Path:
    """A file under node_modules; a missing one fails the test (never skips) with the fix."""
    path = NODE_MODULES / rel
    if not path.exists():
        pytest.fail(f"{path} is missing: run `npm ci` in {ROOT} (CI runs it; see package.json)", pytrace=False)
    return path


@functools.lru_cache(maxsize=1)
def _definitions() -> dict[str, list[dict[str, Any]]]:
    data = json.loads(node_file("@octokit/webhooks-examples/api.github.com/index.json").read_text())
    return {d["name"]: d["examples"] for d in data}


def example(event: str, action: str | None = None) -> dict[str, Any]:
    """A fresh copy of the first real example of `event` (with `action`)."""
    for payload in _definitions()[event]:
        if action is None or payload.get("action") == action:
            return copy.deepcopy(payload)
    raise LookupError(f"@octokit/webhooks-examples has no {event}/{action} example")


def as_fork(payload: dict[str, Any], owner: str = "mallory") -> dict[str, Any]:
    """The same PR, opened from `owner`'s fork by `owner` (a first-time contributor)."""
    pr = payload["pull_request"]
    repo = copy.deepcopy(pr["head"]["repo"])
    name = repo["name"]
    repo.update(full_name=f"{owner}/{name}", fork=True)
    repo["owner"] = {**repo["owner"], "login": owner}
    pr["head"]["repo"] = repo
    pr["head"]["label"] = f"{owner}:{pr['head']['ref']}"
    pr["user"] = {**pr["user"], "login": owner}
    pr["author_association"] = "FIRST_TIME_CONTRIBUTOR"
    return payload


def pr_comment(body: str, association: str = "OWNER", login: str = "Codertocat") -> dict[str, Any]:
    """A real issue_comment/created payload, moved onto a pull request, with `body`."""
    payload = example("issue_comment", "created")
    issue = payload["issue"]
    issue["pull_request"] = {"url": issue["url"].replace("/issues/", "/pulls/"),
                             "html_url": issue["html_url"].replace("/issues/", "/pull/"),
                             "diff_url": None, "patch_url": None, "merged_at": None}
    payload["comment"]["body"] = body
    payload["comment"]["author_association"] = association
    payload["comment"]["user"] = {**payload["comment"]["user"], "login": login}
    return payload
