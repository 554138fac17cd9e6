"""GitHub's REST API for the gate and the pull-request bot, through PyGithub (imported lazily).

One object per (token, repository, API URL). Every call goes to GITHUB_API_URL, so GitHub
Enterprise works. Every API failure becomes a one-line `KforgeError` saying what the bot was doing,
what GitHub answered, and the usual fix (token scopes, workflow `permissions:`, rate limits).
The token is never put in a message or a log line.

What the `pr` command needs:
- `get_pull(n)`: the PR as a REST object (to complete comment/dispatch events);
- `find_follow_up(branch)` / `open_or_update_follow_up(...)`: one follow-up PR per bot branch,
  found again by its head branch (`owner:branch`), never duplicated;
- `upsert_comment(n, body, marker)`: one comment on the original PR, found by a hidden marker;
- `set_status(sha, ...)`, `permission(login)`, `remove_label(n, label)`, `close_pull(n)`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from kforge_bot.errors import KforgeError
from kforge_bot.github.actions import DEFAULT_API_URL, Actions
from kforge_bot.text import clip

STATUS_CONTEXT = "kforge-bot"
STATUS_STATES = ("error", "failure", "pending", "success")
_PERMISSIONS_HINT = ("give the job `permissions: {contents: write, pull-requests: write, statuses: write}`; "
                     "fork PRs get a read-only token; for the Actions token also enable 'Allow GitHub Actions "
                     "to create and approve pull requests'")


@dataclass(frozen=True)
class FollowUp:
    number: int
    url: str  # html url
    state: str  # open | closed
    merged: bool
    head_sha: str
    action: str = "found"  # found | created | updated


@dataclass(frozen=True)
class CommentRef:
    id: int
    url: str
    action: str  # created | updated | unchanged


def _sanitize(text: str, token: str | None) -> str:
    text = " ".join(str(text).split())
    if token:
        text = text.replace(token, "***")
    return text


def _quiet_pygithub() -> None:
    """PyGithub puts a stderr handler at INFO on its `github` logger, so its retry logic prints each
    failed request ("Request GET ... failed with 403") around the one-line error this module
    raises. Those lines say nothing the error does not; keep warnings and above."""
    retry_log = logging.getLogger("github.GithubRetry")
    if retry_log.level in (logging.NOTSET, logging.DEBUG, logging.INFO):
        retry_log.setLevel(logging.WARNING)


class GitHub:
    """PyGithub, bound to one repository; errors mapped to `KforgeError`."""

    def __init__(self, token: str, repository: str, *, api_url: str = DEFAULT_API_URL, throttle: bool = True,
                 retries: int = 3, max_rate_limit_wait: float = 60.0, secondary_rate_wait: float = 60.0,
                 timeout: int = 30):
        if not token:
            raise KforgeError("no GitHub token", hint="pass `github-token: ${{ secrets.GITHUB_TOKEN }}` to the action")
        if repository.count("/") != 1 or not all(repository.split("/")):
            raise KforgeError(f"repository {repository!r} is not owner/name", hint="check GITHUB_REPOSITORY")
        try:
            from github import Auth, Github, GithubRetry  # PyGithub: not on the device machines
        except ImportError as exc:  # pragma: no cover - a hard dependency, missing only on GPU boxes
            raise KforgeError("PyGithub is not installed", hint="pip install PyGithub") from exc
        _quiet_pygithub()
        self.repository = repository
        self.owner = repository.split("/")[0]
        self.api_url = api_url.rstrip("/")
        self._token = token
        # Waiting out a primary rate limit can take an hour: fail fast past `max_rate_limit_wait`.
        retry = GithubRetry(total=retries, backoff_factor=0.5 if throttle else 0.0,
                            max_rate_limit_wait=max_rate_limit_wait, secondary_rate_wait=secondary_rate_wait)
        throttling: dict[str, Any] = {} if throttle else {"seconds_between_requests": None,
                                                         "seconds_between_writes": None}
        self._gh = Github(auth=Auth.Token(token), base_url=self.api_url, retry=retry, timeout=timeout,
                          lazy=True, user_agent="kforge-bot", **throttling)
        self._repo = self._gh.get_repo(repository)  # lazy: no request until needed

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kwargs: Any) -> GitHub:
        """From the Actions environment: GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_API_URL."""
        actions = Actions.read(env)
        if not actions.token:
            raise KforgeError("GITHUB_TOKEN is not set",
                              hint="pass `github-token: ${{ secrets.GITHUB_TOKEN }}` to the action "
                                   "(it reaches kforge-bot as GITHUB_TOKEN)")
        if not actions.repository:
            raise KforgeError("GITHUB_REPOSITORY is not set", hint="run inside GitHub Actions or set it to owner/name")
        return cls(actions.token, actions.repository, api_url=actions.api, **kwargs)

    def __repr__(self) -> str:  # no token
        return f"GitHub({self.repository!r}, api_url={self.api_url!r})"

    # -- error mapping ---------------------------------------------------------------------
    @contextmanager
    def _call(self, doing: str, hint_422: str | None = None) -> Iterator[None]:
        import requests  # with PyGithub: not on the device machines
        from github import GithubException
        from github.GithubException import BadCredentialsException, RateLimitExceededException

        where = f"GitHub API ({self.api_url})"
        try:
            yield
        except GithubException as exc:
            status = exc.status
            headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
            data = exc.data if isinstance(exc.data, Mapping) else {}
            message = _sanitize(data.get("message") or exc.message or str(exc.data or ""), self._token)
            details = [_sanitize(e.get("message") or f"{e.get('field', '?')} {e.get('code', 'invalid')}", self._token)
                       for e in data.get("errors") or [] if isinstance(e, Mapping)]
            said = f"{status} {message}" + (f": {'; '.join(details)}" if details else "")
            rate_limited = (isinstance(exc, RateLimitExceededException) or status == 429
                            or headers.get("x-ratelimit-remaining") == "0" or "rate limit" in message.lower())
            if rate_limited:
                raise KforgeError(f"{where}: rate limit exceeded while {doing} ({said})",
                                  hint=self._rate_limit_hint(headers, getattr(exc, "wait", None))) from None
            if isinstance(exc, BadCredentialsException) or status == 401:
                raise KforgeError(f"{where}: the token was rejected while {doing} ({said})",
                                  hint="the token is invalid or expired; "
                                       "pass `github-token: ${{ secrets.GITHUB_TOKEN }}`") from None
            if status == 403:
                raise KforgeError(f"{where}: permission denied while {doing} ({said})", hint=_PERMISSIONS_HINT) from None
            if status == 404:
                raise KforgeError(f"{where}: not found while {doing} ({said})",
                                  hint=f"check that {self.repository} exists and the token can read it "
                                       "(private repositories answer 404)") from None
            if status == 422:
                raise KforgeError(f"{where}: GitHub rejected the request while {doing} ({said})",
                                  hint=hint_422 or "the request was invalid; see the message") from None
            raise KforgeError(f"{where}: error while {doing} ({said})",
                              hint="GitHub may be having trouble; re-run the job") from None
        except requests.exceptions.RetryError as exc:
            text = _sanitize(str(exc), self._token)
            if "429" in text or "403" in text:
                raise KforgeError(f"{where}: rate limit exceeded while {doing} (still limited after retries)",
                                  hint="GitHub's secondary rate limit: wait a few minutes and re-run, "
                                       "or run fewer jobs at once") from None
            raise KforgeError(f"{where}: error while {doing} (gave up after retries: {text[:200]})",
                              hint="GitHub may be having trouble; re-run the job") from None
        except requests.exceptions.RequestException as exc:
            raise KforgeError(f"{where}: cannot reach GitHub while {doing} ({type(exc).__name__})",
                              hint="check GITHUB_API_URL and the runner's network") from None

    @staticmethod
    def _rate_limit_hint(headers: Mapping[str, str], wait: float | None) -> str:
        reset = headers.get("x-ratelimit-reset")
        if reset and reset.isdigit():
            when = datetime.fromtimestamp(int(reset), timezone.utc).strftime("%H:%M:%S UTC")
            return f"the limit resets at {when}; re-run after that, or use a GitHub App token (higher limits)"
        if headers.get("retry-after"):
            return f"GitHub asks to wait {headers['retry-after']} s; re-run later or run fewer jobs at once"
        if wait:
            return f"the limit resets in about {int(wait)} s; re-run after that"
        return "wait and re-run, or use a GitHub App token (higher limits)"

    # -- reads ---------------------------------------------------------------------------------
    def repository_info(self) -> dict[str, Any]:
        """The repository as a REST object (a cheap first call that proves token and URL work)."""
        with self._call(f"reading {self.repository}"):
            repo = self._gh.get_repo(self.repository)
            repo.complete()
            return dict(repo.raw_data)

    def get_pull(self, number: int) -> dict[str, Any]:
        """The pull request as GitHub's REST object (same shape as the webhook's `pull_request`)."""
        with self._call(f"reading pull request #{number}"):
            pull = self._repo.get_pull(int(number))
            pull.complete()
            return dict(pull.raw_data)

    def permission(self, login: str) -> str:
        """admin | write | read | none: `login`'s permission on the repository."""
        with self._call(f"reading the permission of @{login}"):
            return str(self._repo.get_collaborator_permission(login))

    def user(self, login: str) -> dict[str, Any]:
        with self._call(f"reading user @{login}"):
            user = self._gh.get_user(login)
            user.complete()
            return dict(user.raw_data)

    # -- follow-up PRs ---------------------------------------------------------------------------
    def find_follow_up(self, branch: str, state: str = "open") -> FollowUp | None:
        """The newest PR whose head is `branch` in this repository, in `state` (open|closed|all)."""
        with self._call(f"looking for the pull request of {branch}"):
            # `owner:` is required: without it GitHub silently ignores the head filter.
            for pull in self._repo.get_pulls(state=state, head=f"{self.owner}:{branch}"):
                if pull.head.ref == branch:
                    return FollowUp(number=pull.number, url=pull.html_url, state=pull.state,
                                    merged=pull.merged_at is not None, head_sha=pull.head.sha)
        return None

    def open_or_update_follow_up(self, *, branch: str, base: str, base_repo: str, title: str, body: str,
                                 draft: bool = False) -> FollowUp:
        """Open the follow-up PR `branch` -> `base`, or update the open one (found by branch).

        `base_repo` is the repository that owns `base` (the original PR's head repository). A
        fork's branch cannot be a PR base here, and a same-named branch of this repository
        must never be targeted by mistake, so anything but this repository is refused.
        """
        if base_repo.lower() != self.repository.lower():
            raise KforgeError(f"cannot open a follow-up PR against {base_repo}:{base}: a pull request in "
                              f"{self.repository} can only target its own branches",
                              hint="for fork PRs, put the evidence and the patch in the comment instead")
        existing = self.find_follow_up(branch)
        if existing is None:
            try:
                with self._call(f"opening the pull request {branch} -> {base}",
                                hint_422=f"push {branch} first; it must differ from {base}, which must exist"):
                    pull = self._repo.create_pull(base=base, head=branch, title=title, body=body, draft=draft)
                return FollowUp(number=pull.number, url=pull.html_url, state=pull.state, merged=False,
                                head_sha=pull.head.sha, action="created")
            except KforgeError as exc:
                if "already exists" not in str(exc):
                    raise
                # Opened by a concurrent run between our search and our create: update that one.
                existing = self.find_follow_up(branch)
                if existing is None:
                    raise
        with self._call(f"updating pull request #{existing.number}",
                        hint_422="the title or body is invalid (too long?) or the base branch is gone"):
            pull = self._repo.get_pull(existing.number)
            pull.edit(title=title, body=body, base=base)
        return FollowUp(number=existing.number, url=existing.url, state="open", merged=False,
                        head_sha=existing.head_sha, action="updated")

    def open_or_comment_issue(self, *, title: str, body: str, marker: str, comment: str, comment_marker: str,
                              label: str) -> CommentRef:
        """The one open issue carrying `marker` (a hidden HTML comment) and `label`: opened with `body` when there is
        none, else `comment` added to it, once (a comment already carrying `comment_marker` is left as it is). The
        issue's or the comment's reference; action created | commented | unchanged."""
        if marker not in body:
            body = f"{body.rstrip()}\n\n{marker}\n"
        if comment_marker not in body:
            body = f"{body.rstrip()}\n{comment_marker}\n"
        with self._call(f"looking for the open issue labelled {label!r}"):
            found = next((i for i in self._repo.get_issues(state="open", labels=[label])
                          if i.pull_request is None and marker in (i.body or "")), None)
        if found is None:
            with self._call("opening an issue", hint_422="the title or body is invalid (too long?)"):
                issue = self._repo.create_issue(title=title, body=body, labels=[label])
            return CommentRef(id=issue.number, url=issue.html_url, action="created")
        if comment_marker in (found.body or ""):
            return CommentRef(id=found.number, url=found.html_url, action="unchanged")
        with self._call(f"commenting on issue #{found.number}"):
            if any(comment_marker in (c.body or "") for c in found.get_comments()):
                return CommentRef(id=found.number, url=found.html_url, action="unchanged")
            made = found.create_comment(f"{comment.rstrip()}\n\n{comment_marker}\n")
        return CommentRef(id=made.id, url=made.html_url, action="commented")

    def close_pull(self, number: int, comment: str | None = None) -> None:
        with self._call(f"closing pull request #{number}"):
            if comment:
                self._repo.get_issue(int(number)).create_comment(comment)
            self._repo.get_pull(int(number)).edit(state="closed")

    # -- comment, status, labels -------------------------------------------------------------------
    def upsert_comment(self, number: int, body: str, marker: str) -> CommentRef:
        """Create or update THE comment on #number that carries `marker` (a hidden HTML comment)."""
        if marker not in body:
            body = f"{body.rstrip()}\n\n{marker}\n"
        with self._call(f"updating the kforge-bot comment on #{number}",
                        hint_422="the comment is invalid (longer than 65536 characters?)"):
            issue = self._repo.get_issue(int(number))
            by_bot = by_anyone = None
            for comment in issue.get_comments():
                if marker in (comment.body or ""):
                    # The newest wins; a bot account's (the Actions token's) beats a person's copy.
                    by_anyone = comment
                    if comment.user is not None and comment.user.type == "Bot":
                        by_bot = comment
            mine = by_bot or by_anyone
            if mine is None:
                created = issue.create_comment(body)
                return CommentRef(id=created.id, url=created.html_url, action="created")
            if mine.body == body:
                return CommentRef(id=mine.id, url=mine.html_url, action="unchanged")
            mine.edit(body)
            return CommentRef(id=mine.id, url=mine.html_url, action="updated")

    def set_status(self, sha: str, state: str, description: str, *, context: str = STATUS_CONTEXT,
                   target_url: str | None = None) -> None:
        if state not in STATUS_STATES:
            raise KforgeError(f"commit status state {state!r} is not one of {', '.join(STATUS_STATES)}")
        description = clip(description, 140)
        kwargs: dict[str, Any] = {"state": state, "description": description, "context": context}
        if target_url:
            kwargs["target_url"] = target_url
        with self._call(f"setting the {context} status on {sha[:12]}"):
            self._repo.get_commit(sha).create_status(**kwargs)

    def remove_label(self, number: int, label: str) -> bool:
        """Remove `label` from #number; False when it was not there."""
        from github import GithubException  # PyGithub: not on the device machines

        with self._call(f"removing the label {label!r} from #{number}"):
            try:
                self._repo.get_issue(int(number)).remove_from_labels(label)
            except GithubException as exc:
                if exc.status == 404:  # "Label does not exist" on this issue
                    return False
                raise
        return True
