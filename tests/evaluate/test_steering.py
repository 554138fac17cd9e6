"""Issue 38's attacks on the timed comparison from inside the worker (3.1, 3.2), each through the full evaluate() on
the CPU, sandboxed where the machine can, with the static scan as it is (neither candidate trips it).

Both candidates are slower than the baseline; each used to be reported several times faster."""

from __future__ import annotations

from pathlib import Path

import pytest
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, load_spec

DATA = Path(__file__).parents[1] / "data"
PROBLEM = DATA / "adversarial" / "problem.py"
TIMED = EvalSettings(seeds=2, timing_budget_s=0.5, profile=False, timeout_s=120)


def _evaluate(name: str) -> object:
    return evaluate(load_spec(PROBLEM), Implementation.from_file(DATA / "steering" / f"{name}.py", "ModelNew"), "cpu",
                    TIMED)


@pytest.mark.slow
def test_helper_processes_alive_while_the_baseline_is_timed_end_the_evaluation() -> None:
    result = _evaluate("helper_processes")
    assert result.verdict == "rejected", result.reason
    assert "process(es) besides the worker were alive while timed samples ran" in result.reason
    assert result.speedup is None


@pytest.mark.slow
def test_a_memo_by_tensor_object_and_version_finds_nothing_in_timed_samples() -> None:
    result = _evaluate("memo_version")
    # A kernel doing its work three times is not faster, whatever the load (pass or inconclusive, never faster).
    assert result.verdict in ("pass", "inconclusive"), result.reason
    assert result.speedup is not None and result.speedup < 1.0, result.reason
    assert not result.faster
