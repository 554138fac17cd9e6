"""`/kforge ack <KERNEL@COMMIT> <reason>`: acknowledging a change point from a comment on an issue or a pull request
(the regression issue the bot opened, typically). Restricted as the bot's other comment commands are
(kforge_bot.github.trust.may_command: the policy's trusted associations, and write permission looked up); anyone else's
is refused with the reason. The acknowledgement records the commenter and the comment."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kforge_bot.github.trust import may_command
from kforge_bot.errors import KforgeError

_ACK = re.compile(r"^/kforge\s+ack\s+(\S+)\s+(\S.*)$")


@dataclass(frozen=True)
class AckComment:
    repository: str
    number: int
    sender: str
    association: str
    change_id: str
    reason: str
    url: str


def _field(obj: Any, key: str, where: str, kind: type) -> Any:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    if not isinstance(value, kind):
        raise KforgeError(f"the issue_comment event has no {where}.{key}", hint="run on an issue_comment event")
    return value


def parse_ack_comment(event_name: str, payload: Any) -> AckComment | str:
    """The acknowledgement a new comment asks for, or why the event is not one (a line for the log)."""
    if event_name != "issue_comment":
        return f"event {event_name!r} is not a comment"
    if _field(payload, "action", "payload", str) != "created":
        return "only new comments carry commands"
    comment = _field(payload, "comment", "payload", Mapping)
    body = comment.get("body") or ""
    for line in str(body).splitlines():
        match = _ACK.match(line.strip())
        if match:
            user = _field(comment, "user", "comment", Mapping)
            return AckComment(repository=_field(_field(payload, "repository", "payload", Mapping), "full_name",
                                                "repository", str),
                              number=_field(_field(payload, "issue", "payload", Mapping), "number", "issue", int),
                              sender=_field(user, "login", "comment.user", str),
                              association=str(comment.get("author_association") or ""),
                              change_id=match[1], reason=match[2], url=str(comment.get("html_url") or ""))
    return "the comment has no /kforge ack command"


def refusal(request: AckComment, permission: str | None, associations: tuple[str, ...]) -> str | None:
    """None when the commenter may acknowledge, else why not."""
    if may_command(request.association, permission, associations):
        return None
    return (f"/kforge ack by @{request.sender} ({request.association or 'unknown association'}"
            f"{', ' + permission + ' permission' if permission else ''}) ignored: only "
            f"{', '.join(sorted(associations))} with write access can command kforge-bot")
