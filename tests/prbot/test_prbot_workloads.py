"""The PR bot and workloads (issue 44): a follow-up PR shows each workload that uses the kernel end to end beside the
kernel's own figures, and with the policy's `require_workload_gain` a kernel faster alone that does not speed up
every such workload gets no follow-up PR. Through `kforge-bot pr` as the action runs it (a real git repository with
a bare origin, the loopback GitHub API, the built-in tuner, every worker sandboxed); verdicts asserted, not ratios.

The kernel pads a partial block of rows to a whole one: the tuner's larger block is several times faster on the
manifest's shape (64 rows), and far slower on one row of a wide tensor (63 rows of padding), which is how the
`single` workload calls it. The `batch` workload calls it on the manifest's shape."""

from __future__ import annotations

import json

import pytest

from fakes.github_server import FakeGitHub
from fakes.pr_repos import POLICY_PATH, REPO, PullRequest

pytestmark = pytest.mark.timeout(900)

KERNEL = '''\
"""RMS norm of each row, BLOCK rows a step; {note}"""
import os

import torch

# Evaluated code must never see the bot's credentials: fail loudly if it does.
if any(k == "GITHUB_TOKEN" or "ghs_fake_token" in v for k, v in os.environ.items()):
    raise RuntimeError("credentials visible to evaluated code")

BLOCK = 1  # kforge: tune BLOCK in [1, 64]


def rmsnorm(x, w):
    rows = x.shape[0]
    out = torch.empty_like(x)
    for start in range(0, rows, BLOCK):
        part = x[start:start + BLOCK]
        if part.shape[0] < BLOCK:  # a partial block is padded to a whole one
            part = torch.cat([part, part.new_zeros(BLOCK - part.shape[0], part.shape[1])])
        y = part * torch.rsqrt(part.pow(2).mean(1, keepdim=True) + 1e-6) * w
        n = min(BLOCK, rows - start)
        out[start:start + n] = y[:n]
    return out


def reference(x, w):
    return x * torch.rsqrt(torch.linalg.vector_norm(x, dim=1, keepdim=True).square() / x.shape[1] + 1e-6) * w


def make_inputs(rows, cols):
    return torch.randn(rows, cols), torch.rand(cols) + 0.5
'''
MODEL = '''\
import torch

from kernels.rmsnorm import rmsnorm


def make_inputs(*, seed, device, rows, cols, steps):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=gen), torch.rand(cols, generator=gen) + 0.5, steps


def forward(x, w, steps):
    for _ in range(steps):
        x = x + 0.5 * rmsnorm(x, w)
    return x[-1, :64]
'''
MANIFEST = """\
version: 1
kernels:
  rmsnorm:
    file: kernels/rmsnorm.py
    entry: rmsnorm
    reference: kernels/rmsnorm.py:reference
    inputs: kernels/rmsnorm.py:make_inputs
    shapes: [{rows: 64, cols: 2048}]
    targets: [cpu]
    language: torch
    seeds: 1
workloads:
  batch:
    file: model.py
    entry: forward
    args: {rows: 64, cols: 2048, steps: 4}
    unit: ms/step
    compare: {logits: {atol: 0.001, rtol: 0.001}}
    warmup: 1
    repeats: 2
    targets: [cpu]
  single:
    file: model.py
    entry: forward
    args: {rows: 1, cols: 65536, steps: 4}
    unit: ms/step
    compare: {logits: {atol: 0.001, rtol: 0.001}}
    warmup: 1
    repeats: 2
    targets: [cpu]
"""
POLICY = """\
version: 1
min_speedup: 1.01
allow_framework_fallback: true
budgets: {{iterations: 1, tokens: 1000, time_limit_s: 600}}
evaluation: {{seeds: 1, timing_budget_s: 0.5, timeout_s: 240, cpu_threads: 1}}
gate:
  workloads: {{threshold: 0.25, precision: 0.05, min_pairs: 6, max_pairs: 12, budget_s: 120, sample_s: 0.2}}
require_workload_gain: {require}
"""


@pytest.fixture()
def fake():
    with FakeGitHub() as server:
        yield server
        assert server.schema_errors == []


def pull_request(tmp_path, fake: FakeGitHub, require: bool) -> PullRequest:
    base = {POLICY_PATH: POLICY.format(require=str(require).lower()), "kforge.yaml": MANIFEST, "model.py": MODEL,
            "kernels/__init__.py": "", "kernels/rmsnorm.py": KERNEL.format(note="first version")}
    return PullRequest(tmp_path, fake, base, {"kernels/rmsnorm.py": KERNEL.format(note="blocks of rows")})


def follow_ups(fake: FakeGitHub) -> list:
    return [p for p in fake.pulls_of(REPO) if p.head_ref.startswith("kforge/")]


@pytest.mark.slow
def test_the_follow_up_pr_shows_each_workload_beside_the_kernel(tmp_path, fake):
    pr = pull_request(tmp_path, fake, require=False)
    proc = pr.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [up] = follow_ups(fake)
    body = up.body
    assert "| target | before | after | speedup (95% interval) | roofline |" in body  # the kernel's own table
    assert "End to end: the workloads that use this kernel" in body
    assert "| workload | target | before | after | speedup (95% interval) | pairs | verdict |" in body
    rows = {line.split("|")[1].strip(): line for line in body.splitlines() if line.startswith("| `")}
    assert rows["`batch`"].rstrip().endswith("| improved |"), rows
    assert "| regression: the workload is slower end to end" in rows["`single`"], rows
    assert "`batch` faster; `single` not measurably faster" in body
    [entry] = pr.kernels().values()
    verdicts = {w["name"]: w["verdict"] for w in entry["outcome"]["workloads"]}
    assert verdicts == {"batch": "improved", "single": "regression"}
    assert all(w["pairs"] >= 6 for w in entry["outcome"]["workloads"])
    assert "end to end `batch`" in pr.comment() and "end to end `single`" in pr.comment()


@pytest.mark.slow
def test_require_workload_gain_opens_no_pr_for_a_kernel_faster_alone_that_slows_a_workload(tmp_path, fake):
    pr = pull_request(tmp_path, fake, require=True)
    proc = pr.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert follow_ups(fake) == []
    [entry] = pr.kernels().values()
    assert entry["qualifies"] is False
    assert entry["outcome"]["targets"][0]["ci_low"] > 1.0  # faster alone, with confidence
    assert entry["outcome"]["skip_reason"].startswith("faster alone, but workload single is not faster end to end")
    assert "require_workload_gain" in pr.comment() and "end to end `single`" in pr.comment()
    assert json.loads(pr.results.read_text())["follow_up_prs"] == []
