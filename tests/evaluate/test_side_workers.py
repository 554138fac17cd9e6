"""Base and head in workers of their own (issue 38, "Each side in its own process"), on real CPU workers: what the
head loads never reaches the base's process, and a failure is charged to the side whose worker it was in."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from fakes.gate_repos import tiny_spec_in, write
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.sandbox import WorkerOutcome
from kforge_bot.evaluate.side_workers import base_failure, merge_timing
from kforge_bot.kernelspec import Implementation

SETTINGS = EvalSettings(seeds=1, timing_budget_s=0.3, profile=False)

# Both sides say `import utils` and mean their own file. The head's marks the process it is loaded in; the base's
# kernel refuses to run in a process where it finds that mark (one process for both: the base's calls crash).
BASE_UTILS = "def twice(x):\n    return x * 2.0\n"
HEAD_UTILS = "import os\n\nos.environ['KFORGE_TEST_HEAD_UTILS'] = 'loaded here'\n\n\ndef twice(x):\n    return x + x\n"
BASE_KERNEL = """\
import os

import utils


def kernel(x, y):
    if os.environ.get('KFORGE_TEST_HEAD_UTILS'):
        raise RuntimeError("the head's utils module was loaded in the base's process")
    return utils.twice(x) + y
"""
HEAD_KERNEL = "import utils\n\n\ndef kernel(x, y):\n    return utils.twice(x) + y\n"


def _side(folder: Path, kernel: str, utils: str) -> Implementation:
    write(folder, "utils.py", utils)
    write(folder, "k.py", kernel)
    return Implementation(kernel, "kernel", "k.py", str(folder))


@pytest.mark.slow
def test_a_module_both_sides_import_by_one_name_is_each_sides_own_and_the_base_never_sees_the_heads(
        tmp_path: Path) -> None:
    spec = tiny_spec_in(tmp_path)
    base = _side(tmp_path / "base", BASE_KERNEL, BASE_UTILS)
    head = _side(tmp_path / "head", HEAD_KERNEL, HEAD_UTILS)
    result = evaluate(spec, head, "cpu", SETTINGS, baseline=base)
    assert result.verdict == "pass", result.reason
    assert result.speedup is not None and result.speedup > 0
    # Two workers beside the reference's: the base's phases are its own worker's.
    assert "baseline_worker" in result.details["phases"]
    # The layout before the split (one worker for both, kept for measuring the split's cost): the base finds the mark.
    together = evaluate(spec, head, "cpu", SETTINGS, baseline=base, one_worker=True)
    assert together.verdict == "crash" and "the head's utils module was loaded" in together.reason, together.reason


@pytest.mark.slow
def test_one_worker_where_nothing_is_timed_or_both_sides_are_one_implementation(tmp_path: Path) -> None:
    spec = tiny_spec_in(tmp_path)
    head = _side(tmp_path / "head", HEAD_KERNEL, HEAD_UTILS)
    unmeasured = evaluate(spec, head, "cpu", EvalSettings(seeds=1, profile=False, measure=False))
    assert unmeasured.verdict == "pass", unmeasured.reason
    assert "baseline_worker" not in unmeasured.details["phases"]
    same = evaluate(spec, head, "cpu", SETTINGS, baseline=head)
    assert same.verdict == "pass", same.reason
    assert "baseline_worker" not in same.details["phases"]


HANGS_WHEN_TIMED = """\
import time

calls = 0


def kernel(x, y):
    global calls
    calls += 1
    if calls > 3:  # past its first call and the warm-up's first: hangs inside the timing
        time.sleep(3600)
    return x * 2.0 + y
"""
PLAIN = "def kernel(x, y):\n    return x * 2.0 + y\n"


@pytest.mark.slow
def test_a_base_that_hangs_while_timed_is_charged_to_the_base_and_a_hanging_head_to_the_head(tmp_path: Path) -> None:
    spec = tiny_spec_in(tmp_path)
    hangs = Implementation(HANGS_WHEN_TIMED, "kernel", "k.py", spec.root)
    fine = Implementation(PLAIN, "kernel", "k.py", spec.root)
    settings = EvalSettings(seeds=1, timing_budget_s=0.3, profile=False, stall_floor_s=4.0)
    for expected, (candidate, baseline) in {"baseline": (fine, hangs), "candidate": (hangs, fine)}.items():
        result = evaluate(spec, candidate, "cpu", settings, baseline=baseline)
        assert result.verdict in ("timeout", "crash"), (expected, result.verdict, result.reason)
        assert result.details["failed_side"] == expected, (expected, result.reason)


def test_the_bases_end_becomes_the_base_verdict_and_the_parents_figures_replace_the_workers() -> None:
    hung = WorkerOutcome(timed_out=True, stalled_s=4.0, returncode=-9)
    message = base_failure(hung).result or {}
    assert message["status"] == "timeout" and message["side"] == "baseline"
    assert message["reason"].startswith("the baseline's worker: its worker made no progress for 4 s")
    head = {"timing": [{"shape": 0, "baseline_ms": [], "candidate_ms": [], "directions": {"forward": {}}}]}
    merge_timing(head, {"0:": {"baseline_ms": [2.0], "candidate_ms": [1.0]}, "0:forward": {"baseline_ms": [3.0]}})
    assert head["timing"][0]["baseline_ms"] == [2.0] and head["timing"][0]["candidate_ms"] == [1.0]
    assert head["timing"][0]["directions"]["forward"] == {"baseline_ms": [3.0]}


# A kernel that is its own reference (no `reference:`): the gate judges the head against the base's version
# (gate.base_spec.judged_spec). The base's module marks the process it is imported in; the head's kernel refuses to
# run where it finds that mark.
BASE_MARKS = """\
import os

os.environ['KFORGE_TEST_BASE_LOADED'] = 'here'


def kernel(x, y):
    return x * 2.0 + y
"""
HEAD_LOOKS = """\
import os


def kernel(x, y):
    if os.environ.get('KFORGE_TEST_BASE_LOADED'):
        raise RuntimeError("the base's code was loaded in the head's process")
    return y + x * 2.0
"""


@pytest.mark.slow
def test_where_a_kernel_is_its_own_reference_no_base_code_is_loaded_in_the_heads_process(tmp_path: Path) -> None:
    spec = tiny_spec_in(tmp_path)
    base = Implementation(BASE_MARKS, "kernel", "k.py", str(tmp_path / "base"))
    write(tmp_path / "base", "k.py", BASE_MARKS)
    head = Implementation(HEAD_LOOKS, "kernel", "k.py", str(tmp_path / "head"))
    write(tmp_path / "head", "k.py", HEAD_LOOKS)
    judged = replace(spec, reference=base)  # what judged_spec makes of a kernel that names no reference
    result = evaluate(judged, head, "cpu", SETTINGS, baseline=base)
    assert result.verdict == "pass", result.reason


# The common layout: the kernel, its reference and its inputs in one file. Under the gate the reference and the inputs
# are the base's (gate.base_spec.judged_spec), so the base's whole file, its kernel's code and whatever that loads at
# import included, is imported in the head's worker as the reference's and the inputs' module.
BASE_FILE_MARKS = BASE_MARKS + """

def reference(x, y):
    return x * 2.0 + y


def make_inputs(n):
    import torch
    return torch.randn(n, n), torch.randn(n, n)
"""


@pytest.mark.slow
def test_where_the_reference_shares_the_kernels_file_no_base_code_is_loaded_in_the_heads_process(
        tmp_path: Path) -> None:
    spec = tiny_spec_in(tmp_path)
    write(tmp_path / "base", "k.py", BASE_FILE_MARKS)
    write(tmp_path / "head", "k.py", HEAD_LOOKS)
    base = Implementation(BASE_FILE_MARKS, "kernel", "k.py", str(tmp_path / "base"))
    head = Implementation(HEAD_LOOKS, "kernel", "k.py", str(tmp_path / "head"))
    judged = replace(spec, reference=replace(base, symbol="reference"),
                     inputs_source=replace(base, symbol="make_inputs"), inputs_symbol="make_inputs")
    result = evaluate(judged, head, "cpu", SETTINGS, baseline=base)
    assert result.verdict == "pass", result.reason
