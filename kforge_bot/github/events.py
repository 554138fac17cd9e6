"""GitHub Actions events -> one typed `PullRequestEvent` (or `Ignored`, with the reason).

Handles `pull_request` / `pull_request_target` (opened, synchronize, reopened, labeled),
`workflow_dispatch` (input `pr`) and `issue_comment` (`/kforge optimize|retry|stop` on a PR).
Comment and dispatch payloads do not carry the PR's refs; such an event comes back incomplete
(`complete` is False) and is filled in from the REST pull-request object with `with_pull`.

A payload that lacks what its event must have raises `KforgeError` naming the file and the key.
Pure: no network, no git.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kforge_bot.errors import KforgeError
from kforge_bot.github.actions import Actions

PR_EVENTS = ("pull_request", "pull_request_target")
PR_ACTIONS = ("opened", "synchronize", "reopened", "labeled")
COMMANDS = ("optimize", "retry", "stop")
_COMMAND = re.compile(r"^/kforge(?:\s+(\S+))?\s*(.*)$")


@dataclass(frozen=True)
class PullRequestEvent:
    event_name: str
    action: str | None
    repository: str  # the base repository, owner/name
    number: int
    base_ref: str | None = None
    base_sha: str | None = None
    head_ref: str | None = None
    head_sha: str | None = None
    head_repo: str | None = None  # None when the fork was deleted
    is_fork: bool | None = None
    author: str | None = None
    author_association: str | None = None
    labels: tuple[str, ...] = ()
    label_added: str | None = None  # the label of a `labeled` event
    command: str | None = None  # optimize | retry | stop, for comments
    sender: str | None = None  # who caused the event (labeler, commenter, dispatcher)
    sender_association: str | None = None  # the commenter's association (issue_comment only)
    state: str | None = None  # open | closed
    draft: bool | None = None

    @property
    def complete(self) -> bool:
        return None not in (self.base_ref, self.base_sha, self.head_ref, self.head_sha, self.is_fork,
                            self.author_association)

    def with_pull(self, pull: Mapping[str, Any], *, source: str = "GET /pulls/{n}") -> PullRequestEvent:
        """This event with the PR's refs, author and labels taken from a REST pull-request object."""
        fields = _pull_fields(pull, self.repository, source)
        if fields["number"] != self.number:
            raise KforgeError(f"pull request {fields['number']} does not match event PR {self.number}", path=source)
        return replace(self, **fields)


@dataclass(frozen=True)
class Ignored:
    """An event that asks the bot for nothing; `reason` says why (printed, exit 0)."""

    event_name: str
    reason: str


def _get(obj: Any, key: str, source: str, where: str, kind: type | tuple[type, ...] | None = None,
         optional: bool = False) -> Any:
    if not isinstance(obj, Mapping):
        raise KforgeError(f"event payload: {where} is not an object", path=source,
                          hint="pass the event file GitHub wrote (GITHUB_EVENT_PATH)")
    if key not in obj or (obj[key] is None and not optional):
        if optional:
            return None
        raise KforgeError(f"event payload has no {where}.{key}".replace("payload.", ""), path=source,
                          hint="pass the event file GitHub wrote (GITHUB_EVENT_PATH) with the matching GITHUB_EVENT_NAME")
    value = obj[key]
    kinds = () if kind is None else kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python; a JSON true is never a PR number.
    wrong = kinds and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds))
    if value is not None and wrong:
        raise KforgeError(f"event payload: {where}.{key} has the wrong type ({type(value).__name__})".replace(
            "payload.", ""), path=source)
    return value


def _labels(obj: Mapping[str, Any], source: str, where: str) -> tuple[str, ...]:
    raw = _get(obj, "labels", source, where, list, optional=True) or []
    names = []
    for i, label in enumerate(raw):
        names.append(_get(label, "name", source, f"{where}.labels[{i}]", str))
    return tuple(names)


def _pull_fields(pr: Mapping[str, Any], repository: str, source: str, where: str = "pull_request") -> dict[str, Any]:
    base = _get(pr, "base", source, where, Mapping)
    head = _get(pr, "head", source, where, Mapping)
    head_repo_obj = _get(head, "repo", source, f"{where}.head", Mapping, optional=True)
    head_repo = _get(head_repo_obj, "full_name", source, f"{where}.head.repo", str) if head_repo_obj else None
    base_repo_obj = _get(base, "repo", source, f"{where}.base", Mapping)
    base_repo = _get(base_repo_obj, "full_name", source, f"{where}.base.repo", str)
    if base_repo.lower() != repository.lower():
        raise KforgeError(f"{where}.base.repo is {base_repo}, not this repository {repository}", path=source)
    user = _get(pr, "user", source, where, Mapping)
    return {
        "number": _get(pr, "number", source, where, int),
        "base_ref": _get(base, "ref", source, f"{where}.base", str),
        "base_sha": _get(base, "sha", source, f"{where}.base", str),
        "head_ref": _get(head, "ref", source, f"{where}.head", str),
        "head_sha": _get(head, "sha", source, f"{where}.head", str),
        "head_repo": head_repo,
        # A deleted fork has no head repo; it is someone else's code all the same.
        "is_fork": head_repo is None or head_repo.lower() != base_repo.lower(),
        "author": _get(user, "login", source, f"{where}.user", str),
        "author_association": _get(pr, "author_association", source, where, str),
        "labels": _labels(pr, source, where),
        "state": _get(pr, "state", source, where, str, optional=True),
        "draft": _get(pr, "draft", source, where, bool, optional=True),
    }


def parse_command(body: str) -> str | None:
    """The `/kforge <command>` on a line of its own (quoted lines ignored); None when there is none.

    `/kforge` alone means `optimize`. An unknown word comes back as-is for the caller to refuse.
    """
    for line in body.splitlines():
        line = line.strip()
        m = _COMMAND.match(line)
        if m:
            return (m.group(1) or "optimize").lower()
    return None


def parse_event(event_name: str, payload: Any, *, source: str | Path = "<event>") -> PullRequestEvent | Ignored:
    src = str(source)
    if not isinstance(payload, Mapping):
        raise KforgeError("event payload is not a JSON object", path=src)
    repo_obj = _get(payload, "repository", src, "payload", Mapping)
    repository = _get(repo_obj, "full_name", src, "repository", str)
    sender_obj = _get(payload, "sender", src, "payload", Mapping, optional=True)
    sender = _get(sender_obj, "login", src, "sender", str) if sender_obj else None

    if event_name in PR_EVENTS:
        action = _get(payload, "action", src, "payload", str)
        pr = _get(payload, "pull_request", src, "payload", Mapping)
        fields = _pull_fields(pr, repository, src)
        if action not in PR_ACTIONS:
            return Ignored(event_name, f"pull_request action '{action}' does not start a run "
                                       f"(runs on: {', '.join(PR_ACTIONS)})")
        label_added = None
        if action == "labeled":
            label_added = _get(_get(payload, "label", src, "payload", Mapping), "name", src, "label", str)
        return PullRequestEvent(event_name=event_name, action=action, repository=repository, sender=sender,
                                label_added=label_added, **fields)

    if event_name == "issue_comment":
        action = _get(payload, "action", src, "payload", str)
        issue = _get(payload, "issue", src, "payload", Mapping)
        comment = _get(payload, "comment", src, "payload", Mapping)
        number = _get(issue, "number", src, "issue", int)
        if action != "created":
            return Ignored(event_name, f"comment {action}: only new comments carry commands")
        if _get(issue, "pull_request", src, "issue", Mapping, optional=True) is None:
            return Ignored(event_name, f"#{number} is an issue, not a pull request")
        body = _get(comment, "body", src, "comment", str, optional=True) or ""
        command = parse_command(body)
        if command is None:
            return Ignored(event_name, "the comment has no /kforge command")
        if command not in COMMANDS:
            return Ignored(event_name, f"unknown command '/kforge {command}' (known: "
                                       f"{', '.join('/kforge ' + c for c in COMMANDS)})")
        commenter = _get(_get(comment, "user", src, "comment", Mapping), "login", src, "comment.user", str)
        return PullRequestEvent(
            event_name=event_name, action=action, repository=repository, number=number,
            author=_get(_get(issue, "user", src, "issue", Mapping), "login", src, "issue.user", str),
            labels=_labels(issue, src, "issue"), command=command, sender=commenter,
            sender_association=_get(comment, "author_association", src, "comment", str),
            state=_get(issue, "state", src, "issue", str, optional=True))

    if event_name == "workflow_dispatch":
        inputs = _get(payload, "inputs", src, "payload", Mapping, optional=True) or {}
        raw = inputs.get("pr")
        if raw is None or str(raw).strip() == "":
            raise KforgeError("workflow_dispatch has no input 'pr'", path=src,
                              hint="declare `inputs: pr` in the workflow and pass the pull request number")
        text = str(raw).strip().lstrip("#")
        if not text.isdigit() or int(text) <= 0:
            raise KforgeError(f"workflow_dispatch input 'pr' is {raw!r}, not a pull request number", path=src)
        return PullRequestEvent(event_name=event_name, action=None, repository=repository, number=int(text),
                                command="optimize", sender=sender)

    return Ignored(event_name, f"event '{event_name}' is not handled (pull_request, pull_request_target, "
                               f"issue_comment, workflow_dispatch are)")


def event_payload(path: str | Path) -> Any:
    """The JSON payload the Actions runner wrote ($GITHUB_EVENT_PATH), or a one-line error."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise KforgeError("event file not found", path=p, hint="run inside GitHub Actions or set GITHUB_EVENT_PATH") from exc
    except OSError as exc:
        raise KforgeError(f"cannot read the event file: {exc.strerror}", path=p) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise KforgeError(f"event file is not valid JSON (line {exc.lineno}: {exc.msg})", path=p) from exc


def load_event(path: str | Path, event_name: str) -> PullRequestEvent | Ignored:
    return parse_event(event_name, event_payload(path), source=Path(path))


def from_env(env: Mapping[str, str] | None = None) -> PullRequestEvent | Ignored:
    """The event of the running workflow, from GITHUB_EVENT_NAME and GITHUB_EVENT_PATH."""
    actions = Actions.read(env)
    missing = actions.missing("event_name", "event_path")
    if missing:
        raise KforgeError(f"{' and '.join(missing)} not set",
                          hint="run inside GitHub Actions, or set them to an event name and a payload file")
    return load_event(actions.event_path, actions.event_name)
