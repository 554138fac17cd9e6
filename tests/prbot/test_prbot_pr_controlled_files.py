"""The PR bot reads every file a pull request controls through the one reader (issue 38): a GPU MODE problem whose
task.yml names /proc/self/environ (by `../`, or by a committed link) gets its error as the skip reason, and the
token in the bot's environment reaches neither the PR comment nor the summary nor the results; a problem folder
named as Markdown renders nothing. Through `kforge-bot pr` as the action runs it, with the loopback GitHub API."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.github_server import FakeGitHub
from fakes.markdown import assert_nothing_live
from fakes.pr_repos import PullRequest

GPUMODE = Path(__file__).resolve().parents[1] / "data" / "gpumode"
BASE = {f"gm/{p.relative_to(GPUMODE).as_posix()}": p.read_text() for p in sorted(GPUMODE.rglob("*"))
        if p.is_file() and "candidates" not in p.parts}

# The PR's new problem: its reference hands back, as its error, whatever the bot wrote into `leak.py`.
LEAKING_REFERENCE = '''\
import pathlib

import torch

LEAKED = (pathlib.Path(__file__).parent / "leak.py").read_text(errors="replace")


def generate_input(size: int, seed: int):
    return torch.ones(size)


def ref_kernel(data):
    raise RuntimeError("leaked: " + " ".join(p for p in LEAKED.split("\\0") if p.startswith("GITHUB_TOKEN")))
'''


def leaking_task(source: str) -> str:
    return ('files:\n  - {"name": "submission.py", "source": "@SUBMISSION@"}\n'
            f'  - {{"name": "leak.py", "source": "{source}"}}\nlang: "py"\n'
            'tests:\n  - {"size": 8, "seed": 1}\n')


@pytest.fixture()
def fake():
    with FakeGitHub() as server:
        yield server
        assert server.schema_errors == []


@pytest.mark.parametrize("how", ["dots", "link"])
def test_the_token_never_reaches_the_pr_comment(tmp_path, fake, how):
    source = "../" * 40 + "proc/self/environ" if how == "dots" else "env"
    head = {"gm/leak_py/reference.py": LEAKING_REFERENCE, "gm/leak_py/submission.py": "def custom_kernel(d):\n"
            "    return d\n", "gm/leak_py/task.yml": leaking_task(source)}
    links = {"gm/leak_py/env": Path("/proc/self/environ")} if how == "link" else None
    pr = PullRequest(tmp_path, fake, BASE, head, links=links)
    proc = pr.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    everything = proc.stdout + proc.stderr + pr.results.read_text() + pr.summary.read_text() + pr.comment()
    assert fake.token not in everything, "the bot's token reached what it prints or posts"
    leak = pr.kernels()["gm/leak_py"]
    assert "resolves outside the checkout" in leak["outcome"]["skip_reason"], leak


def test_a_problem_folder_named_as_markdown_renders_nothing(tmp_path, fake):
    name = "![i](e.png)@octo-org"
    head = {f"gm/{name}/{rel}": BASE[f"gm/scaled_add_py/{rel}"]
            for rel in ("reference.py", "submission.py", "task.py", "task.yml")}
    pr = PullRequest(tmp_path, fake, BASE, head)
    proc = pr.run()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "a problem folder's path may use letters, digits and ._-/ only" in proc.stderr.strip().splitlines()[-1]
    for comment in fake.comments_on("octo/kernels", pr.number):
        assert_nothing_live(comment.body, "![i](e.png)", "@octo-org")
    assert_nothing_live(pr.summary.read_text() if pr.summary.exists() else "", "![i](e.png)", "@octo-org")
