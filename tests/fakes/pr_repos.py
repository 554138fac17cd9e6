"""A pull request on a real repository for the PR bot's attack tests: a bare origin, main and a `feature` branch
made of the files given, the Action's checkout of the head, the loopback GitHub API, and `kforge-bot pr` run as the
action's run step runs it (a child process, GitHub Actions' environment, from an empty folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from fakes.gate_repos import PACKAGE_ROOT, QUIET_MACHINE
from fakes.github_server import FakeGitHub
from fakes.gitrepos import action_checkout, git, push_branches
from fakes.webhooks import example

REPO = "octo/kernels"
POLICY_PATH = ".github/kforge-policy.yml"
POLICY = """\
version: 1
min_speedup: 1.01
budgets: {iterations: 1, tokens: 1000, time_limit_s: 600}
evaluation: {seeds: 1, timing_budget_s: 0.5, timeout_s: 240}
"""


class PullRequest:
    """PR #1 from `feature` into `main` by a collaborator with write access."""

    def __init__(self, tmp: Path, fake: FakeGitHub, base: dict[str, str], head: dict[str, str | None],
                 links: dict[str, Path] | None = None):
        self.tmp, self.fake = tmp, fake
        self.origin, _, self.base_sha, self.head_sha = push_branches(tmp, {POLICY_PATH: POLICY, **base}, head,
                                                                     links=links)
        self.work = action_checkout(tmp, self.origin, self.head_sha)
        self.number = open_pull(fake, self.origin, self.head_sha)

    def event(self, labels: tuple[str, ...] = ()) -> Path:
        payload = example("pull_request", "opened")
        payload["repository"]["full_name"] = REPO
        pr = payload["pull_request"]
        pr["number"] = payload["number"] = self.number
        pr["base"]["repo"]["full_name"] = pr["head"]["repo"]["full_name"] = REPO
        pr["user"]["login"], pr["author_association"] = "ada", "COLLABORATOR"
        pr["labels"] = [{"name": label} for label in labels]
        pr["base"].update(ref="main", sha=self.base_sha)
        pr["head"].update(ref="feature", sha=self.head_sha)
        path = self.tmp / "event.json"
        path.write_text(json.dumps(payload))
        return path

    def run(self, *args: str, labels: tuple[str, ...] = (), timeout: float = 600) -> subprocess.CompletedProcess:
        """`kforge-bot pr` with the policy the workflow names (its path in the checkout) and GitHub Actions' env."""
        self.results = self.tmp / "results.json"
        self.summary = self.tmp / "summary.md"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "OPENAI_", "KFORGE_"))}
        env.update({"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request",
                    "GITHUB_EVENT_PATH": str(self.event(labels)), "GITHUB_REPOSITORY": REPO,
                    "GITHUB_API_URL": self.fake.api_url, "GITHUB_TOKEN": self.fake.token,
                    "GITHUB_WORKSPACE": str(self.work), "GITHUB_STEP_SUMMARY": str(self.summary),
                    "GITHUB_SERVER_URL": "https://github.example", "GITHUB_RUN_ID": "4242",
                    "PYTHONPATH": os.pathsep.join((str(QUIET_MACHINE), str(PACKAGE_ROOT))), "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_TERMINAL_PROMPT": "0"})
        cmd = [sys.executable, "-m", "kforge_bot.cli", "pr", "--policy", str(self.work / POLICY_PATH),
               "--json", str(self.results), "--target", "cpu", "--work-dir", str(self.tmp / "reports"), *args]
        return subprocess.run(cmd, cwd=tempfile.mkdtemp(dir=self.tmp), env=env, capture_output=True, text=True,
                              timeout=timeout)

    def kernels(self) -> dict[str, dict]:
        return {k["id"]: k for k in json.loads(self.results.read_text())["kernels"]}

    def comment(self) -> str:
        [comment] = self.fake.comments_on(REPO, self.number)
        return comment.body


def open_pull(fake: FakeGitHub, origin: Path, head_sha: str, **pull: str) -> int:
    """`origin` served as octo/kernels by the loopback GitHub, with a pull request from `feature` into main by the
    collaborator `ada` (who has write access) and its refs/pull/<n>/head; returns its number."""
    fake.add_repo(REPO, origin)
    fake.set_permission(REPO, "ada", "write")
    number = fake.add_pull(REPO, head_ref="feature", user="ada", author_association="COLLABORATOR", **pull)
    git(origin, "update-ref", f"refs/pull/{number}/head", head_sha)  # GitHub keeps it; comment-triggered runs use it
    return number
