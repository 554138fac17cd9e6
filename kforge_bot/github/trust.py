"""May this event run on self-hosted hardware? One pure decision, with the reason to print.

The rules (GitHub's advice for self-hosted runners on public repositories, tightened):
- Trusted means: author_association OWNER, MEMBER or COLLABORATOR (the policy's
  `trust.allowed_associations`) and, when the caller looked it up, write permission
  (admin, maintain or write). Lacking either one is untrusted.
- A same-repository PR by a trusted author runs (a fork PR too when the policy's
  `trust.allow_forks` is true).
- Anyone else's PR, and every fork PR, runs only when a maintainer has put the trigger label on
  it, and only on a maintainer's action: the `labeled` event itself, a dispatch, or a command
  comment by a trusted user. New commits pushed after the label was added do not run by
  themselves: otherwise a label given to harmless code would let later pushes run anything
  (so the `pr` command removes the label after each run, `GitHub.remove_label`, and a maintainer
  re-adds it after reviewing the new commits).
- Comment commands count only from trusted users.
Fail closed: an event whose PR details are unknown is not allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from kforge_bot.github.events import PullRequestEvent

DEFAULT_TRIGGER_LABEL = "kforge:run"
TRUSTED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})


class Decision(NamedTuple):
    allowed: bool
    reason: str


def _trusted(association: str | None, permission: str | None, associations: frozenset[str]) -> bool:
    # Both facts must hold: a read-only COLLABORATOR is not trusted either.
    if (association or "").upper() not in associations:
        return False
    return permission is None or permission.lower() in WRITE_PERMISSIONS


def may_command(association: str | None, permission: str | None,
                associations: Iterable[str] = TRUSTED_ASSOCIATIONS) -> bool:
    """Whether a commenter may command the bot (the rule every comment command follows, `/kforge ack` included):
    a trusted association and, when looked up, write permission."""
    return _trusted(association, permission, frozenset(a.upper() for a in associations))


def _who(login: str | None, association: str | None, permission: str | None) -> str:
    facts = [association or "unknown association"]
    if permission is not None:
        facts.append(f"{permission} permission")
    return f"@{login or 'unknown'} ({', '.join(facts)})"


def decide(event: PullRequestEvent, *, trigger_label: str = DEFAULT_TRIGGER_LABEL,
           trusted_associations: Iterable[str] = TRUSTED_ASSOCIATIONS, allow_forks: bool = False,
           author_permission: str | None = None, sender_permission: str | None = None) -> Decision:
    """Whether `event` may run on a self-hosted runner, and why.

    `author_permission` / `sender_permission` are the PR author's and the event sender's
    repository permission (admin, write, read, none: GitHub's `permission` field) when the caller
    looked them up; without them the payload's author_association decides alone.
    """
    associations = frozenset(a.upper() for a in trusted_associations)
    if not event.complete:
        return Decision(False, f"PR #{event.number}: refs and author are unknown; look the PR up before deciding")
    if event.state == "closed":
        return Decision(False, f"PR #{event.number} is closed")

    if event.command is not None and event.event_name == "issue_comment":
        if not _trusted(event.sender_association, sender_permission, associations):
            return Decision(False, f"/kforge {event.command} by "
                                   f"{_who(event.sender, event.sender_association, sender_permission)} ignored: "
                                   f"only {', '.join(sorted(associations))} with write access can command kforge-bot")
        if event.command == "stop":
            return Decision(True, f"/kforge stop by @{event.sender}: runs nothing, closes the bot's PRs")

    if event.action == "labeled" and event.label_added != trigger_label:
        return Decision(False, f"label '{event.label_added}' added; only '{trigger_label}' starts a run")

    author = _who(event.author, event.author_association, author_permission)
    trusted_author = _trusted(event.author_association, author_permission, associations)
    if trusted_author and not event.is_fork:
        return Decision(True, f"same-repository PR by {author}")
    if trusted_author and allow_forks:
        return Decision(True, f"fork PR from {event.head_repo or 'a deleted fork'} by {author}; the policy allows forks")

    why = (f"fork PR from {event.head_repo or 'a deleted fork'} by {author}" if event.is_fork
           else f"PR by {author}, who lacks write access")
    if trigger_label not in event.labels:
        return Decision(False, f"{why}: a maintainer must add the '{trigger_label}' label to run it on self-hosted hardware")
    if event.action == "labeled":
        return Decision(True, f"{why}: @{event.sender or 'a maintainer'} added the '{trigger_label}' label")
    if event.event_name == "workflow_dispatch":
        return Decision(True, f"{why}: labeled '{trigger_label}' and dispatched by @{event.sender or 'a maintainer'}")
    if event.event_name == "issue_comment":
        return Decision(True, f"{why}: labeled '{trigger_label}' and /kforge {event.command} by @{event.sender}")
    return Decision(False, f"{why}: new commits ({event.action}) since '{trigger_label}' was added; "
                           f"a maintainer must review them and add the label again")


def approves_spec_change(event: PullRequestEvent, label: str, head_sha: str) -> bool:
    """Whether `event` is a maintainer adding the spec-change `label` to the revision `head_sha`.

    As with the trigger label, only the `labeled` event approves, and only the revision it was given to: a label
    left on the pull request would otherwise approve whatever test a later push writes (a maintainer approves
    one loosened tolerance; the next push loosens it further). A new push needs the label added again."""
    return (event.action == "labeled" and event.label_added == label
            and event.head_sha == head_sha)

