"""`kforge-bot pr` end to end: the real command in a child process, a real git repository with a bare
origin, the loopback GitHub API (responses checked against GitHub's OpenAPI description), the real
PyGithub client, real webhook payloads, and a real C kernel optimized by the built-in tuner on CPU.

The kernel checks its own environment for the GitHub token and fails if it sees it, so a follow-up
PR (which needs a correct baseline and candidate) proves the token never reached evaluated code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_bot import prbot
from kforge_bot.evidence import KernelOutcome, TargetRow
from fakes.github_server import FakeGitHub
from fakes.gitrepos import commit_all, git, write
from fakes.webhooks import as_fork, example

ROOT = Path(__file__).resolve().parents[1]
REPO = "octo/kernels"

MANIFEST = """\
version: 1
kernels:
  rmsnorm:
    file: kernels/rmsnorm.py
    entry: rmsnorm
    reference: kernels/rmsnorm.py:reference
    inputs: kernels/rmsnorm.py:make_inputs
    shapes:
      - {rows: 64, cols: 2048}
    targets: [cpu]
    language: c
    seeds: 1
"""

# CHUNK is the one tunable, and its first value does clearly redundant work: every chunk of CHUNK
# outputs recomputes its row's sum of squares, so 128 reads each row 17 times where 2048 (the whole
# row) reads it twice. The better value is several times faster on any machine, however loaded, so
# the follow-up PR does not hang on a close timing call.
KERNEL = '''\
"""RMS norm of each row, in C, built with the system compiler; {note}"""
import ctypes, hashlib, os, subprocess, tempfile
from pathlib import Path

import torch

# Evaluated code must never see the bot's credentials: fail loudly if it does.
_LEAKED = [k for k, v in os.environ.items() if "ghs_fake_token" in v or k == "GITHUB_TOKEN"]
if _LEAKED:
    raise RuntimeError(f"credentials visible to evaluated code: {{_LEAKED}}")

CHUNK = 128  # kforge: tune CHUNK in [128, 2048]

C_SOURCE = r"""
#include <math.h>
#define CHUNK %d
void rmsnorm(const float* x, const float* w, float* out, int M, int N) {{
    for (int i = 0; i < M; ++i) {{
        const float* row = x + (long)i * N;
        for (int j0 = 0; j0 < N; j0 += CHUNK) {{
            float ss = 0.0f;  /* the row's scale, recomputed for every chunk */
            for (int k = 0; k < N; ++k) ss += row[k] * row[k];
            float scale = 1.0f / sqrtf(ss / N + 1e-6f);
            int jn = (N - j0) < CHUNK ? (N - j0) : CHUNK;
            for (int j = 0; j < jn; ++j) out[(long)i * N + j0 + j] = row[j0 + j] * scale * w[j0 + j];
        }}
    }}
}}
""" % CHUNK


def _build():
    digest = hashlib.sha256(C_SOURCE.encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"kforge-test-prbuild-{{os.getuid()}}"
    folder.mkdir(exist_ok=True)
    lib = folder / f"rmsnorm_{{digest}}.so"
    if not lib.exists():
        src = folder / f"rmsnorm_{{digest}}.c"
        src.write_text(C_SOURCE)
        tmp = lib.with_suffix(f".{{os.getpid()}}.tmp")
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", str(src), "-o", str(tmp), "-lm"],
                       check=True, capture_output=True)
        tmp.replace(lib)
    handle = ctypes.CDLL(str(lib))
    handle.rmsnorm.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 2
    return handle


_LIB = _build()


def rmsnorm(x, w):
    x, w = x.contiguous(), w.contiguous()
    out = torch.empty_like(x)
    _LIB.rmsnorm(x.data_ptr(), w.data_ptr(), out.data_ptr(), x.shape[0], x.shape[1])
    return out


def reference(x, w):
    return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + 1e-6) * w


def make_inputs(rows, cols):
    return torch.randn(rows, cols), torch.rand(cols) + 0.5
'''

POLICY = """\
version: 1
min_speedup: {min_speedup}
budgets: {{iterations: 1, tokens: 1000, time_limit_s: 600}}
evaluation: {{seeds: 1, time_budget_s: 1.0, timeout_s: 240}}
"""


class World:
    def __init__(self, tmp: Path, fake: FakeGitHub):
        self.tmp, self.fake = tmp, fake
        self.origin = tmp / "origin.git"
        git(tmp, "init", "-q", "--bare", "-b", "main", str(self.origin))
        seed = tmp / "seed"
        git(tmp, "clone", "-q", str(self.origin), str(seed))
        git(seed, "checkout", "-q", "-b", "main")
        write(seed, "kforge.yaml", MANIFEST)
        write(seed, "kernels/rmsnorm.py", KERNEL.format(note="first version"))
        write(seed, "README.md", "kernels\n")
        commit_all(seed, "initial")
        git(seed, "push", "-q", "origin", "main")
        git(seed, "checkout", "-q", "-b", "feature")
        write(seed, "kernels/rmsnorm.py", KERNEL.format(note="weights applied in the same pass"))
        self.head_sha = commit_all(seed, "rewrite rmsnorm")
        git(seed, "push", "-q", "origin", "feature")
        self.base_sha = git(seed, "rev-parse", "main")
        # The Action's checkout: the PR head, origin pointing at the bare repository.
        self.work = tmp / "work"
        git(tmp, "clone", "-q", str(self.origin), str(self.work))
        git(self.work, "checkout", "-q", "--detach", self.head_sha)
        fake.add_repo(REPO, self.origin)
        fake.set_permission(REPO, "ada", "write")
        self.number = fake.add_pull(REPO, head_ref="feature", user="ada", author_association="COLLABORATOR",
                                    title="Rewrite rmsnorm")

    def event(self, *, fork: bool = False, action: str = "opened") -> Path:
        payload = example("pull_request", action)
        if fork:
            as_fork(payload)
        payload["repository"]["full_name"] = REPO
        pr = payload["pull_request"]
        pr["number"] = payload["number"] = self.number
        pr["base"]["repo"]["full_name"] = REPO
        if not fork:
            pr["head"]["repo"]["full_name"] = REPO
            pr["user"]["login"], pr["author_association"] = "ada", "COLLABORATOR"
        pr["labels"] = []
        pr["base"].update(ref="main", sha=self.base_sha)
        pr["head"].update(ref="feature", sha=self.head_sha)
        path = self.tmp / f"event-{action}-{'fork' if fork else 'same'}.json"
        path.write_text(json.dumps(payload))
        return path

    def run(self, event: Path, *args: str, min_speedup: float = 1.2, event_name: str = "pull_request",
            timeout: float = 300) -> subprocess.CompletedProcess:
        policy = self.tmp / f"policy-{min_speedup}.yml"
        policy.write_text(POLICY.format(min_speedup=min_speedup))
        self.summary = self.tmp / "summary.md"
        self.results = self.tmp / "results.json"
        env = {**os.environ, "GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(event),
               "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": self.fake.api_url, "GITHUB_TOKEN": self.fake.token,
               "GITHUB_WORKSPACE": str(self.work), "GITHUB_STEP_SUMMARY": str(self.summary),
               "PYTHONPATH": str(ROOT), "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
        for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "KFORGE_MODEL", "KFORGE_POLICY"):
            env.pop(key, None)  # the built-in tuner, and only the policy given here
        cmd = [sys.executable, "-m", "kforge_bot.cli", "pr", "--policy", str(policy), "--results", str(self.results),
               "--target", "cpu", "--work-dir", str(self.tmp / "trajectories"), *args]
        return subprocess.run(cmd, cwd=self.work, env=env, capture_output=True, text=True, timeout=timeout)

    def follow_ups(self):
        return [p for p in self.fake.pulls_of(REPO) if p.head_ref.startswith("kforge/")]


@pytest.fixture()
def world(tmp_path):
    with FakeGitHub() as fake:
        yield World(tmp_path, fake)
        assert fake.schema_errors == [], "the fake sent responses that violate GitHub's OpenAPI description"


def _ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


@pytest.mark.slow
def test_pr_opens_one_follow_up_then_updates_it(world):
    proc = world.run(world.event())
    _ok(proc)
    ups = world.follow_ups()
    assert len(ups) == 1, proc.stderr
    pr = ups[0]
    assert pr.base_ref == "feature" and pr.head_ref == f"kforge/pr-{world.number}/rmsnorm"
    assert pr.title.startswith("kforge: rmsnorm ") and "faster on cpu" in pr.title
    # The evidence: the table row with a CI, correctness, profile, how it was found, reproduce, diff.
    assert "| cpu | " in pr.body and "x (" in pr.body
    for section in ("<summary>Correctness</summary>", "<summary>Profile: before and after</summary>",
                    "<summary>How it was found</summary>", "built-in tuner", "kforge-bot check kernels/rmsnorm.py",
                    "<summary>Diff</summary>", "-CHUNK = 128 ", "+CHUNK = 2048 "):
        assert section in pr.body, section
    # The branch holds the PR head plus one bot commit with the candidate.
    assert world.fake._git(REPO, "rev-parse", f"{pr.head_ref}~1") == world.head_sha
    assert "CHUNK = 2048 " in world.fake._git(REPO, "show", f"{pr.head_ref}:kernels/rmsnorm.py")
    comments = world.fake.comments_on(REPO, world.number)
    assert len(comments) == 1 and f"[#{pr.number}]" in comments[0].body
    assert world.fake.statuses[-1]["state"] == "success" and world.fake.statuses[-1]["sha"] == world.head_sha
    results = json.loads(world.results.read_text())
    assert results["follow_up_prs"] == [pr.number] and results["kernels"][0]["qualifies"] is True
    assert f"#{pr.number}" in world.summary.read_text()
    assert world.fake.token not in proc.stdout + proc.stderr + world.results.read_text()

    # A second run (new push event) updates the same PR and the same comment: no duplicates.
    first_body = pr.body
    proc2 = world.run(world.event(action="synchronize"))
    _ok(proc2)
    assert [p.number for p in world.follow_ups()] == [pr.number]
    assert len(world.fake.comments_on(REPO, world.number)) == 1
    assert sum(1 for r in world.fake.writes() if r.method == "POST" and r.template == "/repos/{owner}/{repo}/pulls") == 1
    assert any(r.method == "PATCH" and r.template == "/repos/{owner}/{repo}/pulls/{pull_number}"
               for r in world.fake.writes())
    assert pr.body != first_body or "follow-up PR #" in proc2.stdout


@pytest.mark.slow
def test_no_improvement_comments_and_opens_nothing(world):
    proc = world.run(world.event(), min_speedup=50)
    _ok(proc)
    assert world.follow_ups() == []
    assert world.fake.branch_sha(REPO, f"kforge/pr-{world.number}/rmsnorm") is None
    body = world.fake.comments_on(REPO, world.number)[0].body
    # Either the loop found nothing faster, or what it found is below the policy's 50x: no PR both ways.
    assert "no follow-up PR: no improvement" in body
    assert "no follow-up PR" in proc.stdout


def test_fork_without_label_runs_nothing(world):
    proc = world.run(world.event(fork=True), event_name="pull_request_target")
    _ok(proc)
    assert "skipped: fork PR from mallory/" in proc.stdout and "'kforge:run' label" in proc.stdout
    assert world.fake.writes() == []
    assert not (world.tmp / "trajectories").exists()  # nothing was evaluated
    assert "not run: fork PR" in world.summary.read_text()
    assert json.loads(world.results.read_text())["allowed"] is False


def test_malformed_event_exits_2_with_one_line(world):
    bad = world.tmp / "bad.json"
    bad.write_text('{"action": "opened", "repository": {"full_name": "octo/kernels"}}')
    proc = world.run(bad)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "event payload has no pull_request" in lines[0] and str(bad) in lines[0]
    notjson = world.tmp / "notjson.json"
    notjson.write_text("{oops")
    proc = world.run(notjson)
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert world.fake.writes() == []


# -- pure pieces ---------------------------------------------------------------------------------

def _doc(target: str, source: str | None, speedup: float, low: float, high: float, correct: bool = True) -> dict:
    row = TargetRow(target, (), 2.0, 2.0 / speedup, speedup, low, high, correct=correct, target_kind="cuda")
    run = prbot.KernelRun(id="mm", outcome=KernelOutcome(kernel="mm", file="kernels/mm.py", targets=(row,)),
                          target=target, kind="cuda", candidate=source, qualifies=low >= 1.05 and correct)
    return {"schema": prbot.SCHEMA, "pr": 1, "kernels": [run.to_dict()]}


def test_aggregate_needs_one_candidate_good_everywhere():
    same = [_doc("b200", "A", 1.8, 1.7, 1.9), _doc("arc-b580", "A", 1.2, 1.1, 1.3)]
    [run] = prbot.aggregate(same, ("b200", "arc-b580"), 1.05)
    assert run.qualifies and [r.target for r in run.outcome.targets] == ["arc-b580", "b200"]

    slower = [_doc("b200", "A", 1.8, 1.7, 1.9), _doc("arc-b580", "A", 0.9, 0.85, 0.95)]
    [run] = prbot.aggregate(slower, (), 1.05)
    assert not run.qualifies and "not faster on arc-b580" in run.outcome.skip_reason

    wrong = [_doc("b200", "A", 1.8, 1.7, 1.9), _doc("arc-b580", "A", 1.5, 1.4, 1.6, correct=False)]
    [run] = prbot.aggregate(wrong, (), 1.05)
    assert not run.qualifies and "not correct on arc-b580" in run.outcome.skip_reason

    different = [_doc("b200", "A", 1.8, 1.7, 1.9), _doc("arc-b580", "B", 1.5, 1.4, 1.6)]
    [run] = prbot.aggregate(different, ("b200", "arc-b580"), 1.05)
    assert not run.qualifies and "was not measured on arc-b580" in run.outcome.skip_reason

    missing_required = [_doc("b200", "A", 1.8, 1.7, 1.9)]
    [run] = prbot.aggregate(missing_required, ("b200", "h200"), 1.05)
    assert not run.qualifies and "not measured on h200" in run.outcome.skip_reason


def test_load_results_dir_errors(tmp_path):
    from kforge_bot.errors import KforgeError

    with pytest.raises(KforgeError, match="no results files"):
        prbot.load_results_dir(tmp_path)
    (tmp_path / "x.json").write_text('{"schema": "other"}')
    with pytest.raises(KforgeError, match="not a kforge-bot pr results file"):
        prbot.load_results_dir(tmp_path)


def test_qualifies_uses_the_lower_end_of_the_interval():
    from kforge_bot.evaluate.result import EvalResult

    good = EvalResult("pass", "ok", "cpu", speedup=1.5, speedup_ci=(1.2, 1.8))
    assert prbot.qualifies(good, 1.05) == (True, "")
    ok, why = prbot.qualifies(good, 1.3)
    assert not ok and "min_speedup 1.3" in why and "1.50x" in why
    assert not prbot.qualifies(EvalResult("incorrect", "output 0 differs", "cpu"), 1.0)[0]
    assert "no improvement" in prbot.qualifies(None, 1.05)[1]
