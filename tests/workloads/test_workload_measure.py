"""A fresh sandboxed process a side, samples in alternating pairs: the head's process imports the head's kernel
module in place of the base's (the overlay), its output is compared with the base's, a side that fails or stops
answering is named, and each sample runs many calls."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from kforge_bot.config.policy import Policy
from kforge_bot.workloads.measure import Budget, Side, measure
from kforge_bot.workloads.spec import load_workloads

PROGRAM = """\
import torch

from kern import tokens


def make_inputs(*, seed, device, n):
    return (n,)


def run(n):
    return torch.tensor(tokens(n))
"""


def workload(tmp_path: Path, kernel: str) -> tuple[Path, object]:
    base = tmp_path / "base"
    base.mkdir()
    (base / "prog.py").write_text(PROGRAM)
    (base / "kern.py").write_text("def tokens(n):\n    return list(range(n))\n")
    (base / "kforge.yaml").write_text("version: 1\nkernels: {}\n")
    head = tmp_path / "head"
    head.mkdir()
    (head / "kern.py").write_text(kernel)
    entry = {"file": "prog.py", "entry": "run", "args": {"n": 6}, "unit": "ms/step", "compare": {"tokens": 6},
             "warmup": 1, "repeats": 2, "targets": ["cpu"]}
    return head, load_workloads(base / "kforge.yaml", {"w": entry})["w"]


SETTINGS = Policy().eval_settings("gate")
ONE_PAIR = Budget(min_pairs=1, max_pairs=1, budget_s=120, sample_s=0.05)


@pytest.mark.slow
def test_the_head_process_imports_the_heads_kernel_and_its_output_is_compared(tmp_path: Path) -> None:
    head, spec = workload(tmp_path, "def tokens(n):\n    return [0, 1, 2, 7, 4, 5]\n")
    m = measure(Side("base", spec), Side("head", spec, {"kern": str(head / "kern.py")}, (str(head),)), "cpu",
                SETTINGS, ONE_PAIR)
    assert m.status == "incorrect"
    assert m.reason == "the greedy tokens differ from the base's at position 3 of 6 (base 3, head 7)"


@pytest.mark.slow
def test_the_same_kernel_from_the_head_matches_and_is_timed_with_its_warm_up(tmp_path: Path) -> None:
    head, spec = workload(tmp_path, "def tokens(n):\n    return list(range(n))\n")
    m = measure(Side("base", spec), Side("head", spec, {"kern": str(head / "kern.py")}, (str(head),)), "cpu",
                SETTINGS, ONE_PAIR)
    assert m.status == "ok" and m.pairs == 1 and m.stop == "1 pairs"
    assert len(m.warmup_ms["base"]) == 1 and len(m.warmup_ms["head"]) == 1
    assert set(m.to_dict()["setup_s"]) == {"base", "head"}
    assert m.calls_per_sample >= spec.repeats  # a sample is at least the workload's repeats, as many as fill it


@pytest.mark.slow
def test_a_head_that_fails_is_named(tmp_path: Path) -> None:
    head, spec = workload(tmp_path, "def tokens(n):\n    raise RuntimeError('boom')\n")
    m = measure(Side("base", spec), Side("head", spec, {"kern": str(head / "kern.py")}, (str(head),)), "cpu",
                SETTINGS, ONE_PAIR)
    assert m.status == "error" and m.reason.startswith("the head failed: RuntimeError: boom")


@pytest.mark.slow
def test_a_head_outside_what_its_process_may_read_cannot_be_imported(tmp_path: Path) -> None:
    head, spec = workload(tmp_path, "def tokens(n):\n    return list(range(n))\n")
    sandboxed = replace(SETTINGS, isolation="required")
    m = measure(Side("base", spec), Side("head", spec, {"kern": str(head / "kern.py")}), "cpu", sandboxed, ONE_PAIR)
    assert m.status == "error" and "the head failed" in m.reason


@pytest.mark.slow
def test_a_head_whose_samples_hang_is_named_after_its_timeout(tmp_path: Path) -> None:
    hang = "import time\n\nCALLS = [0]\n\n\ndef tokens(n):\n    CALLS[0] += 1\n" \
           "    if CALLS[0] > 1:\n        time.sleep(600)\n    return list(range(n))\n"
    head, spec = workload(tmp_path, hang)
    quick = replace(SETTINGS, timeout_s=20)
    m = measure(Side("base", spec), Side("head", spec, {"kern": str(head / "kern.py")}, (str(head),)), "cpu", quick,
                ONE_PAIR)
    assert m.status == "error" and m.reason == "the head failed: gave no answer within 20 s"
