"""A GitHub REST API server on 127.0.0.1 for the real PyGithub client.

Real HTTP (http.server in a thread), in-memory state, and git truth: each repository is backed by
a bare git repository (the same "origin" the bot pushes to), so a pull request's head sha, "no
commits between" and "head does not exist" come from git itself, as on GitHub.

Every response it sends is validated against its schema in GitHub's OpenAPI description
(@octokit/openapi). A response that fails is replaced by HTTP 418 naming the schema error (418 so
that no client retries it) and is recorded in `schema_errors`; the `github_server` fixture fails
the test if any were recorded.

Endpoints (the ones kforge_bot.github.client uses, under an /api/v3 prefix as on GitHub Enterprise):
  GET    /repos/{owner}/{repo}
  GET    /repos/{owner}/{repo}/pulls                     state, head=owner:branch, base, paging
  POST   /repos/{owner}/{repo}/pulls
  GET    /repos/{owner}/{repo}/pulls/{pull_number}
  PATCH  /repos/{owner}/{repo}/pulls/{pull_number}       title, body, state, base
  GET    /repos/{owner}/{repo}/issues                    state, labels (issues only: no pull requests here)
  POST   /repos/{owner}/{repo}/issues
  GET    /repos/{owner}/{repo}/issues/{issue_number}     an issue (PyGithub completes a listed one's absent fields)
  GET    /repos/{owner}/{repo}/issues/{issue_number}/comments   paging (a pull request's or an issue's)
  POST   /repos/{owner}/{repo}/issues/{issue_number}/comments
  PATCH  /repos/{owner}/{repo}/issues/comments/{comment_id}
  DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}
  POST   /repos/{owner}/{repo}/statuses/{sha}
  GET    /repos/{owner}/{repo}/collaborators/{username}/permission
  GET    /users/{username}
Errors can be injected per route: any status with GitHub's body, and rate limits with the
documented headers (x-ratelimit-*, retry-after).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from fakes.openapi import validate_response

PREFIX = "/api/v3"
STAMP = "2026-11-29T12:00:00Z"
DOCS = "https://docs.github.com/rest"
MAX_BODY = 65536


class ApiError(Exception):
    def __init__(self, status: int, message: str, errors: list[dict[str, Any]] | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.errors, self.headers = status, message, errors, headers or {}

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"message": self.message, "documentation_url": DOCS, "status": str(self.status)}
        if self.errors is not None:
            body["errors"] = self.errors
            body.pop("status")
        return body


@dataclass
class Injected:
    method: str
    template: str
    status: int
    body: dict[str, Any]
    headers: dict[str, str]
    times: int


@dataclass
class Request:
    method: str
    path: str
    template: str | None
    query: dict[str, str]
    body: Any
    authorization: str | None


@dataclass
class Pull:
    number: int
    repo: str
    title: str
    body: str | None
    head_ref: str
    base_ref: str
    user: str
    head_repo: str
    author_association: str = "OWNER"
    state: str = "open"
    draft: bool = False
    labels: list[str] = field(default_factory=list)
    head_sha: str | None = None  # frozen once the head branch is gone (forks keep their own)
    id: int = 0
    merged: bool = False


@dataclass
class Issue:
    number: int
    repo: str
    title: str
    body: str | None
    user: str
    labels: list[str] = field(default_factory=list)
    state: str = "open"
    id: int = 0


@dataclass
class Comment:
    id: int
    repo: str
    issue: int
    body: str
    user: str


class FakeGitHub:
    def __init__(self, token: str = "ghs_fake_token_0123456789", bot_login: str = "github-actions[bot]"):
        self.token = token
        self.bot_login = bot_login  # whom the token authenticates as
        self.repos: dict[str, dict[str, Any]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.pulls: dict[tuple[str, int], Pull] = {}
        self.comments: dict[int, Comment] = {}
        self.issues: dict[tuple[str, int], Issue] = {}
        self.statuses: list[dict[str, Any]] = []
        self.permissions: dict[tuple[str, str], str] = {}
        self.requests: list[Request] = []
        self.schema_errors: list[str] = []
        self._injected: list[Injected] = []
        self._next_id = 1000
        self._lock = threading.RLock()
        self.add_user(bot_login, type="Bot")
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api_url(self) -> str:
        return self.host + PREFIX

    # -- state set-up ----------------------------------------------------------------------
    def _id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id

    def add_user(self, login: str, type: str = "User") -> None:
        self.users.setdefault(login, {"login": login, "id": self._id(), "type": type})

    def add_repo(self, full_name: str, git_dir: Path | str, default_branch: str = "main",
                 private: bool = False) -> None:
        owner = full_name.split("/")[0]
        self.add_user(owner)
        self.repos[full_name] = {"full_name": full_name, "git_dir": str(git_dir), "id": self._id(),
                                 "default_branch": default_branch, "private": private, "fork": False}
        self.permissions[(full_name, owner)] = "admin"

    def add_fork(self, full_name: str, parent: str) -> None:
        owner = full_name.split("/")[0]
        self.add_user(owner)
        self.repos[full_name] = {**self.repos[parent], "full_name": full_name, "id": self._id(), "fork": True,
                                 "git_dir": None}

    def set_permission(self, repo: str, login: str, permission: str) -> None:
        self.add_user(login)
        self.permissions[(repo, login)] = permission

    def add_pull(self, repo: str, *, head_ref: str, base_ref: str = "main", user: str | None = None,
                 title: str = "A change", body: str | None = None, head_repo: str | None = None,
                 head_sha: str | None = None, author_association: str = "OWNER",
                 labels: list[str] | None = None) -> int:
        user = user or repo.split("/")[0]
        self.add_user(user)
        number = self._next_number(repo)
        self.pulls[(repo, number)] = Pull(number=number, repo=repo, title=title, body=body, head_ref=head_ref,
                                          base_ref=base_ref, user=user, head_repo=head_repo or repo,
                                          author_association=author_association, labels=list(labels or []),
                                          head_sha=head_sha, id=self._id())
        return number

    def add_comment(self, repo: str, number: int, body: str, user: str) -> int:
        """A comment written by someone else (a human): the bot may read it but not edit it."""
        self.add_user(user)
        c = Comment(id=self._id(), repo=repo, issue=number, body=body, user=user)
        self.comments[c.id] = c
        return c.id

    def _next_number(self, repo: str) -> int:
        used = [n for (r, n) in [*self.pulls, *self.issues] if r == repo]
        return max(used, default=0) + 1

    def inject(self, method: str, template: str, status: int, message: str = "injected", *,
               headers: dict[str, str] | None = None, errors: list[dict[str, Any]] | None = None,
               times: int = 1) -> None:
        """The next `times` requests to `method template` get `status` with GitHub's error body."""
        body = ApiError(status, message, errors).body()
        self._injected.append(Injected(method.upper(), template, status, body, dict(headers or {}), times))

    def inject_rate_limit(self, method: str, template: str, *, reset_in: float = 3600, times: int = 1) -> None:
        """Primary rate limit: 403 with x-ratelimit-remaining: 0 and the reset time."""
        reset = int(time.time() + reset_in)
        self.inject(method, template, 403, "API rate limit exceeded for installation ID 4242.",
                    headers={"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-used": "5000",
                             "x-ratelimit-reset": str(reset), "x-ratelimit-resource": "core"}, times=times)

    def inject_secondary_rate_limit(self, method: str, template: str, *, retry_after: int = 1, times: int = 1,
                                    status: int = 429) -> None:
        """Secondary rate limit: 403 or 429 with retry-after."""
        self.inject(method, template, status,
                    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                    headers={"retry-after": str(retry_after)}, times=times)

    # -- queries for tests -----------------------------------------------------------------
    def pulls_of(self, repo: str, state: str = "all") -> list[Pull]:
        return [p for (r, _), p in sorted(self.pulls.items()) if r == repo and state in ("all", p.state)]

    def comments_on(self, repo: str, number: int) -> list[Comment]:
        return [c for c in sorted(self.comments.values(), key=lambda c: c.id) if c.repo == repo and c.issue == number]

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method != "GET"]

    # -- git truth ---------------------------------------------------------------------------
    def _git(self, repo: str, *args: str) -> str | None:
        git_dir = self.repos[repo]["git_dir"]
        if git_dir is None:
            return None
        proc = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else None

    def branch_sha(self, repo: str, branch: str) -> str | None:
        return self._git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}")

    def _head_sha(self, pull: Pull) -> str:
        if pull.head_repo == pull.repo:
            sha = self.branch_sha(pull.repo, pull.head_ref)
            if sha:
                pull.head_sha = sha
        return pull.head_sha or "0" * 40

    # -- JSON builders (shapes from the OpenAPI schemas) ---------------------------------------
    def _user(self, login: str) -> dict[str, Any]:
        u = self.users.get(login) or {"login": login, "id": 1, "type": "User"}
        api, web = self.api_url, self.host
        return {
            "login": login, "id": u["id"], "node_id": f"U_{u['id']}", "avatar_url": f"{web}/avatars/{login}",
            "gravatar_id": "", "url": f"{api}/users/{login}", "html_url": f"{web}/{login}",
            "followers_url": f"{api}/users/{login}/followers",
            "following_url": f"{api}/users/{login}/following{{/other_user}}",
            "gists_url": f"{api}/users/{login}/gists{{/gist_id}}",
            "starred_url": f"{api}/users/{login}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/users/{login}/subscriptions",
            "organizations_url": f"{api}/users/{login}/orgs", "repos_url": f"{api}/users/{login}/repos",
            "events_url": f"{api}/users/{login}/events{{/privacy}}",
            "received_events_url": f"{api}/users/{login}/received_events", "type": u["type"], "site_admin": False,
        }

    def _public_user(self, login: str) -> dict[str, Any]:
        return {**self._user(login), "name": None, "company": None, "blog": None, "location": None, "email": None,
                "hireable": None, "bio": None, "public_repos": 1, "public_gists": 0, "followers": 0,
                "following": 0, "created_at": STAMP, "updated_at": STAMP}

    def _repo(self, full_name: str, full: bool = False) -> dict[str, Any]:
        r = self.repos[full_name]
        owner, name = full_name.split("/")
        api, web = f"{self.api_url}/repos/{full_name}", f"{self.host}/{full_name}"
        urls = {f"{k}_url": f"{api}/{v}" for k, v in {
            "archive": "{archive_format}{/ref}", "assignees": "assignees{/user}", "blobs": "git/blobs{/sha}",
            "branches": "branches{/branch}", "collaborators": "collaborators{/collaborator}",
            "comments": "comments{/number}", "commits": "commits{/sha}", "compare": "compare/{base}...{head}",
            "contents": "contents/{+path}", "contributors": "contributors", "deployments": "deployments",
            "downloads": "downloads", "events": "events", "forks": "forks", "git_commits": "git/commits{/sha}",
            "git_refs": "git/refs{/sha}", "git_tags": "git/tags{/sha}", "hooks": "hooks",
            "issue_comment": "issues/comments{/number}", "issue_events": "issues/events{/number}",
            "issues": "issues{/number}", "keys": "keys{/key_id}", "labels": "labels{/name}",
            "languages": "languages", "merges": "merges", "milestones": "milestones{/number}",
            "notifications": "notifications{?since,all,participating}", "pulls": "pulls{/number}",
            "releases": "releases{/id}", "stargazers": "stargazers", "statuses": "statuses/{sha}",
            "subscribers": "subscribers", "subscription": "subscription", "tags": "tags",
            "teams": "teams", "trees": "git/trees{/sha}"}.items()}
        data: dict[str, Any] = {
            "id": r["id"], "node_id": f"R_{r['id']}", "name": name, "full_name": full_name,
            "owner": self._user(owner), "private": r["private"], "html_url": web, "description": None,
            "fork": r["fork"], "url": api, **urls, "git_url": f"git://127.0.0.1/{full_name}.git",
            "ssh_url": f"git@127.0.0.1:{full_name}.git", "clone_url": f"{web}.git", "svn_url": web,
            "mirror_url": None, "homepage": None, "language": "Python", "forks_count": 0, "forks": 0,
            "stargazers_count": 0, "watchers_count": 0, "watchers": 0, "size": 1,
            "default_branch": r["default_branch"], "open_issues_count": 0, "open_issues": 0,
            "has_issues": True, "has_projects": False, "has_wiki": False, "has_pages": False,
            "has_downloads": True, "has_discussions": False, "archived": False, "disabled": False,
            "visibility": "private" if r["private"] else "public", "pushed_at": STAMP, "created_at": STAMP,
            "updated_at": STAMP, "license": None, "topics": [],
        }
        if full:
            data.update(network_count=0, subscribers_count=0,
                        permissions={"admin": False, "maintain": False, "push": True, "triage": True, "pull": True})
        return data

    def _label(self, repo: str, name: str) -> dict[str, Any]:
        quoted = urllib.parse.quote(name, safe="")
        return {"id": abs(hash((repo, name))) % 10**9, "node_id": f"L_{quoted}",
                "url": f"{self.api_url}/repos/{repo}/labels/{quoted}", "name": name, "description": None,
                "color": "ededed", "default": False}

    def _pull(self, p: Pull, simple: bool = False) -> dict[str, Any]:
        api, web = f"{self.api_url}/repos/{p.repo}", f"{self.host}/{p.repo}"
        base_sha = self.branch_sha(p.repo, p.base_ref) or "0" * 40
        head_sha = self._head_sha(p)
        head_owner = p.head_repo.split("/")[0]
        data: dict[str, Any] = {
            "url": f"{api}/pulls/{p.number}", "id": p.id, "node_id": f"PR_{p.id}",
            "html_url": f"{web}/pull/{p.number}", "diff_url": f"{web}/pull/{p.number}.diff",
            "patch_url": f"{web}/pull/{p.number}.patch", "issue_url": f"{api}/issues/{p.number}",
            "commits_url": f"{api}/pulls/{p.number}/commits",
            "review_comments_url": f"{api}/pulls/{p.number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{p.number}/comments", "statuses_url": f"{api}/statuses/{head_sha}",
            "number": p.number, "state": p.state, "locked": False, "title": p.title, "user": self._user(p.user),
            "body": p.body, "labels": [self._label(p.repo, n) for n in p.labels], "milestone": None,
            "active_lock_reason": None, "created_at": STAMP, "updated_at": STAMP,
            "closed_at": STAMP if p.state == "closed" else None, "merged_at": STAMP if p.merged else None,
            "merge_commit_sha": None, "assignee": None, "assignees": [], "requested_reviewers": [],
            "requested_teams": [],
            "head": {"label": f"{head_owner}:{p.head_ref}", "ref": p.head_ref, "sha": head_sha,
                     "user": self._user(head_owner), "repo": self._repo(p.head_repo)},
            "base": {"label": f"{p.repo.split('/')[0]}:{p.base_ref}", "ref": p.base_ref, "sha": base_sha,
                     "user": self._user(p.repo.split("/")[0]), "repo": self._repo(p.repo)},
            "_links": {k: {"href": v} for k, v in {
                "self": f"{api}/pulls/{p.number}", "html": f"{web}/pull/{p.number}",
                "issue": f"{api}/issues/{p.number}", "comments": f"{api}/issues/{p.number}/comments",
                "review_comments": f"{api}/pulls/{p.number}/comments",
                "review_comment": f"{api}/pulls/comments{{/number}}", "commits": f"{api}/pulls/{p.number}/commits",
                "statuses": f"{api}/statuses/{head_sha}"}.items()},
            "author_association": p.author_association, "auto_merge": None, "draft": p.draft,
        }
        if not simple:
            data.update(merged=p.merged, mergeable=None, rebaseable=None, mergeable_state="unknown", merged_by=None,
                        comments=len(self.comments_on(p.repo, p.number)), review_comments=0,
                        maintainer_can_modify=False, commits=1, additions=1, deletions=1, changed_files=1)
        return data

    def _comment(self, c: Comment) -> dict[str, Any]:
        api, web = f"{self.api_url}/repos/{c.repo}", f"{self.host}/{c.repo}"
        return {"id": c.id, "node_id": f"IC_{c.id}", "url": f"{api}/issues/comments/{c.id}",
                "html_url": f"{web}/pull/{c.issue}#issuecomment-{c.id}", "body": c.body,
                "user": self._user(c.user), "created_at": STAMP, "updated_at": STAMP,
                "issue_url": f"{api}/issues/{c.issue}", "author_association": "NONE"}

    # -- routing -------------------------------------------------------------------------------
    def _routes(self) -> list[tuple[str, str, Callable[..., tuple[int, Any]]]]:
        return [
            ("GET", "/repos/{owner}/{repo}", self._get_repo),
            ("GET", "/repos/{owner}/{repo}/pulls", self._list_pulls),
            ("POST", "/repos/{owner}/{repo}/pulls", self._create_pull),
            ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", self._get_pull),
            ("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}", self._update_pull),
            ("GET", "/repos/{owner}/{repo}/issues", self._list_issues),
            ("POST", "/repos/{owner}/{repo}/issues", self._create_issue),
            ("GET", "/repos/{owner}/{repo}/issues/{issue_number}", self._get_issue),
            ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments", self._list_comments),
            ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", self._create_comment),
            ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", self._update_comment),
            ("DELETE", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", self._remove_label),
            ("POST", "/repos/{owner}/{repo}/statuses/{sha}", self._create_status),
            ("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission", self._permission),
            ("GET", "/users/{username}", self._get_user),
        ]

    def _match(self, method: str, path: str) -> tuple[str, Callable[..., tuple[int, Any]], dict[str, str]] | None:
        for m, template, handler in self._routes():
            if m != method:
                continue
            pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
            match = re.match(pattern, path)
            if match:
                return template, handler, {k: urllib.parse.unquote(v) for k, v in match.groupdict().items()}
        return None

    def handle(self, method: str, raw_path: str, headers: dict[str, str], raw_body: bytes
               ) -> tuple[int, dict[str, str], Any, str | None]:
        """(status, headers, JSON body, template) for one request."""
        parsed = urllib.parse.urlsplit(raw_path)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        path = parsed.path
        auth = headers.get("authorization")
        try:
            body = json.loads(raw_body) if raw_body else None
        except json.JSONDecodeError:
            body = raw_body.decode(errors="replace")
        found = self._match(method, path[len(PREFIX):]) if path.startswith(PREFIX) else None
        template = found[0] if found else None
        with self._lock:
            self.requests.append(Request(method, path, template, query, body, auth))
        if found is None:
            return 404, {}, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}, None
        template, handler, params = found
        if auth not in (f"token {self.token}", f"Bearer {self.token}"):
            return 401, {}, {"message": "Bad credentials", "documentation_url": DOCS, "status": "401"}, template
        with self._lock:
            for inj in self._injected:
                if inj.method == method and inj.template == template and inj.times > 0:
                    inj.times -= 1
                    return inj.status, dict(inj.headers), dict(inj.body), template
            try:
                if "owner" in params:
                    params["full_name"] = f"{params.pop('owner')}/{params.pop('repo')}"
                    if params["full_name"] not in self.repos:
                        raise ApiError(404, "Not Found")
                status, data, extra = handler(query=query, body=body, **params)
                return status, extra, data, template
            except ApiError as err:
                return err.status, err.headers, err.body(), template

    # -- handlers --------------------------------------------------------------------------------
    def _page(self, items: list[Any], query: dict[str, str], path: str) -> tuple[list[Any], dict[str, str]]:
        per_page = max(1, min(100, int(query.get("per_page", 30))))
        page = max(1, int(query.get("page", 1)))
        last = max(1, -(-len(items) // per_page))
        links = []
        base_q = {k: v for k, v in query.items() if k != "page"}

        def url(n: int) -> str:
            return f"{self.host}{path}?{urllib.parse.urlencode({**base_q, 'page': n, 'per_page': per_page})}"
        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(1)}>; rel="first"', f'<{url(page - 1)}>; rel="prev"']
        return items[(page - 1) * per_page: page * per_page], ({"Link": ", ".join(links)} if links else {})

    def _pull_or_404(self, full_name: str, number: str) -> Pull:
        pull = self.pulls.get((full_name, int(number))) if number.isdigit() else None
        if pull is None:
            raise ApiError(404, "Not Found")
        return pull

    def _get_repo(self, *, full_name: str, query: dict[str, str], body: Any):
        return 200, self._repo(full_name, full=True), {}

    def _list_pulls(self, *, full_name: str, query: dict[str, str], body: Any):
        state = query.get("state", "open")
        if state not in ("open", "closed", "all"):
            raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "field": "state", "code": "invalid"}])
        pulls = self.pulls_of(full_name, state)
        head = query.get("head")
        # Like GitHub: a head filter without "owner:" is silently ignored.
        if head and ":" in head:
            owner, _, ref = head.partition(":")
            pulls = [p for p in pulls if p.head_ref == ref and p.head_repo.split("/")[0] == owner]
        if "base" in query:
            pulls = [p for p in pulls if p.base_ref == query["base"]]
        pulls.sort(key=lambda p: -p.number)  # newest first, GitHub's default sort for created desc
        page, links = self._page(pulls, query, f"{PREFIX}/repos/{full_name}/pulls")
        return 200, [self._pull(p, simple=True) for p in page], links

    def _check_body(self, resource: str, text: Any) -> None:
        if text is not None and not isinstance(text, str):
            raise ApiError(422, "Invalid request.\n\nFor 'properties/body', it is not a string.")
        if isinstance(text, str) and len(text) > MAX_BODY:
            raise ApiError(422, "Validation Failed", [{"resource": resource, "code": "custom", "field": "body",
                                                        "message": f"body is too long (maximum is {MAX_BODY} characters)"}])

    def _create_pull(self, *, full_name: str, query: dict[str, str], body: Any):
        body = body if isinstance(body, dict) else {}
        missing = [k for k in ("head", "base") if not body.get(k)]
        if missing or not (body.get("title") or body.get("issue")):
            raise ApiError(422, "Invalid request.\n\n" + ", ".join(f'"{k}" wasn\'t supplied.' for k in missing or ["title"]))
        self._check_body("PullRequest", body.get("body"))
        owner = full_name.split("/")[0]
        head = body["head"]
        head_owner, _, head_ref = head.rpartition(":")
        if head_owner and head_owner != owner:
            raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "field": "head", "code": "invalid"}])
        base_ref = body["base"]
        head_sha, base_sha = self.branch_sha(full_name, head_ref), self.branch_sha(full_name, base_ref)
        if base_sha is None:
            raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "field": "base", "code": "invalid"}])
        if head_sha is None:
            raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "field": "head", "code": "invalid"}])
        for p in self.pulls_of(full_name, "open"):
            if p.head_ref == head_ref and p.base_ref == base_ref and p.head_repo == full_name:
                message = f"A pull request already exists for {owner}:{head_ref}."
                raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "code": "custom", "message": message}])
        if self._git(full_name, "merge-base", "--is-ancestor", head_sha, base_sha) is not None:
            raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "code": "custom",
                                                        "message": f"No commits between {base_ref} and {head_ref}"}])
        number = self._next_number(full_name)
        pull = Pull(number=number, repo=full_name, title=body["title"], body=body.get("body"), head_ref=head_ref,
                    base_ref=base_ref, user=self.bot_login, head_repo=full_name, author_association="NONE",
                    draft=bool(body.get("draft", False)), id=self._id())
        self.pulls[(full_name, number)] = pull
        return 201, self._pull(pull), {"Location": f"{self.api_url}/repos/{full_name}/pulls/{number}"}

    def _get_pull(self, *, full_name: str, pull_number: str, query: dict[str, str], body: Any):
        return 200, self._pull(self._pull_or_404(full_name, pull_number)), {}

    def _update_pull(self, *, full_name: str, pull_number: str, query: dict[str, str], body: Any):
        pull = self._pull_or_404(full_name, pull_number)
        body = body if isinstance(body, dict) else {}
        self._check_body("PullRequest", body.get("body"))
        if "state" in body and body["state"] not in ("open", "closed"):
            raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "field": "state", "code": "invalid"}])
        if "base" in body and self.branch_sha(full_name, body["base"]) is None:
            raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "field": "base", "code": "invalid"}])
        for key, attr in (("title", "title"), ("body", "body"), ("state", "state"), ("base", "base_ref")):
            if key in body:
                setattr(pull, attr, body[key])
        return 200, self._pull(pull), {}

    def _thread_or_404(self, full_name: str, number: str) -> Pull | Issue:
        issue = self.issues.get((full_name, int(number))) if number.isdigit() else None
        return issue if issue is not None else self._pull_or_404(full_name, number)

    def _issue(self, i: Issue) -> dict[str, Any]:
        api, web = f"{self.api_url}/repos/{i.repo}", f"{self.host}/{i.repo}"
        return {"id": i.id, "node_id": f"I_{i.id}", "url": f"{api}/issues/{i.number}", "repository_url": api,
                "labels_url": f"{api}/issues/{i.number}/labels{{/name}}", "comments_url": f"{api}/issues/{i.number}/comments",
                "events_url": f"{api}/issues/{i.number}/events", "html_url": f"{web}/issues/{i.number}",
                "number": i.number, "state": i.state, "title": i.title, "body": i.body, "user": self._user(i.user),
                "labels": [self._label(i.repo, name) for name in i.labels], "assignee": None, "assignees": [],
                "milestone": None, "locked": False, "comments": len(self.comments_on(i.repo, i.number)),
                "closed_at": None, "created_at": STAMP, "updated_at": STAMP, "author_association": "NONE"}

    def issues_of(self, repo: str) -> list[Issue]:
        return sorted((i for (r, _), i in self.issues.items() if r == repo), key=lambda i: i.number)

    def _list_issues(self, *, full_name: str, query: dict[str, str], body: Any):
        state = query.get("state", "open")
        wanted = [name for name in query.get("labels", "").split(",") if name]
        items = [i for i in self.issues_of(full_name) if state == "all" or i.state == state]
        items = [i for i in items if all(name in i.labels for name in wanted)]
        items.sort(key=lambda i: -i.number)
        page, links = self._page(items, query, f"{PREFIX}/repos/{full_name}/issues")
        return 200, [self._issue(i) for i in page], links

    def _create_issue(self, *, full_name: str, query: dict[str, str], body: Any):
        body = body if isinstance(body, dict) else {}
        if not body.get("title"):
            raise ApiError(422, "Validation Failed", [{"resource": "Issue", "field": "title", "code": "missing_field"}])
        self._check_body("Issue", body.get("body"))
        issue = Issue(number=self._next_number(full_name), repo=full_name, title=str(body["title"]),
                      body=body.get("body"), user=self.bot_login, labels=[str(x) for x in body.get("labels") or []],
                      id=self._id())
        self.issues[(full_name, issue.number)] = issue
        return 201, self._issue(issue), {"Location": self._issue(issue)["url"]}

    def _get_issue(self, *, full_name: str, issue_number: str, query: dict[str, str], body: Any):
        issue = self.issues.get((full_name, int(issue_number))) if issue_number.isdigit() else None
        if issue is None:
            raise ApiError(404, "Not Found")
        return 200, self._issue(issue), {}

    def _list_comments(self, *, full_name: str, issue_number: str, query: dict[str, str], body: Any):
        pull = self._thread_or_404(full_name, issue_number)
        items = self.comments_on(full_name, pull.number)
        page, links = self._page(items, query, f"{PREFIX}/repos/{full_name}/issues/{pull.number}/comments")
        return 200, [self._comment(c) for c in page], links

    def _create_comment(self, *, full_name: str, issue_number: str, query: dict[str, str], body: Any):
        pull = self._thread_or_404(full_name, issue_number)
        text = body.get("body") if isinstance(body, dict) else None
        if not text:
            raise ApiError(422, "Invalid request.\n\n\"body\" wasn't supplied.")
        self._check_body("IssueComment", text)
        c = Comment(id=self._id(), repo=full_name, issue=pull.number, body=text, user=self.bot_login)
        self.comments[c.id] = c
        return 201, self._comment(c), {"Location": self._comment(c)["url"]}

    def _update_comment(self, *, full_name: str, comment_id: str, query: dict[str, str], body: Any):
        c = self.comments.get(int(comment_id)) if comment_id.isdigit() else None
        if c is None or c.repo != full_name:
            raise ApiError(404, "Not Found")
        if c.user != self.bot_login:
            raise ApiError(403, "You must have push access to edit this comment.")
        text = body.get("body") if isinstance(body, dict) else None
        if not text:
            raise ApiError(422, "Validation Failed", [{"resource": "IssueComment", "field": "body", "code": "missing_field"}])
        self._check_body("IssueComment", text)
        c.body = text
        return 200, self._comment(c), {}

    def _remove_label(self, *, full_name: str, issue_number: str, name: str, query: dict[str, str], body: Any):
        pull = self._pull_or_404(full_name, issue_number)
        if name not in pull.labels:
            raise ApiError(404, "Label does not exist")
        pull.labels.remove(name)
        return 200, [self._label(full_name, n) for n in pull.labels], {}

    def _create_status(self, *, full_name: str, sha: str, query: dict[str, str], body: Any):
        body = body if isinstance(body, dict) else {}
        if body.get("state") not in ("error", "failure", "pending", "success"):
            raise ApiError(422, "Validation Failed", [{"resource": "Status", "field": "state", "code": "invalid"}])
        if self._git(full_name, "cat-file", "-e", f"{sha}^{{commit}}") is None:
            raise ApiError(422, f"No commit found for SHA: {sha}")
        description = body.get("description")
        if description is not None and len(description) > 140:
            raise ApiError(422, "Validation Failed", [{"resource": "Status", "code": "custom", "field": "description",
                                                        "message": "description is too long (maximum is 140 characters)"}])
        sid = self._id()
        status = {"url": f"{self.api_url}/repos/{full_name}/statuses/{sha}", "avatar_url": None, "id": sid,
                  "node_id": f"SC_{sid}", "state": body["state"], "description": description,
                  "target_url": body.get("target_url"), "context": body.get("context") or "default",
                  "created_at": STAMP, "updated_at": STAMP, "creator": self._user(self.bot_login)}
        self.statuses.append({**status, "sha": sha, "repo": full_name})
        return 201, status, {}

    def _permission(self, *, full_name: str, username: str, query: dict[str, str], body: Any):
        if username not in self.users:
            raise ApiError(404, "Not Found")
        default = "none" if self.repos[full_name]["private"] else "read"
        permission = self.permissions.get((full_name, username), default)
        legacy = {"maintain": "write", "triage": "read"}.get(permission, permission)
        user = {**self._user(username), "role_name": permission}
        return 200, {"permission": legacy, "role_name": permission, "user": user}, {}

    def _get_user(self, *, username: str, query: dict[str, str], body: Any):
        if username not in self.users:
            raise ApiError(404, "Not Found")
        return 200, self._public_user(username), {}

    # -- HTTP ----------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, extra, body, template = fake.handle(self.command, self.path, headers, raw)
                if template is not None:
                    problems = validate_response(template, self.command, status, body)
                    if problems:
                        with fake._lock:
                            fake.schema_errors.extend(problems)
                        status, extra = 418, {}
                        body = {"message": "fake GitHub sent a response that violates the OpenAPI schema: "
                                           + "; ".join(problems), "documentation_url": DOCS}
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-GitHub-Api-Version-Selected", "2022-11-28")
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve

        return Handler
