"""Base against head outputs: greedy tokens exactly, logits within the tolerance."""

from __future__ import annotations

import math

from kforge_bot.workloads.compare import mismatch


def record(values: list, shape: list | None = None) -> dict:
    return {"values": values, "shape": shape or [len(values)], "dtype": "float32"}


def test_tokens_compare_the_first_n_exactly_and_say_where_they_part() -> None:
    assert mismatch(record([1, 2, 3, 4]), record([1, 2, 3, 9]), {"tokens": 3}) is None
    reason = mismatch(record([1, 2, 3, 4]), record([1, 5, 3, 4]), {"tokens": 4})
    assert reason == "the greedy tokens differ from the base's at position 1 of 4 (base 2, head 5)"
    assert "produced only 2" in mismatch(record([1, 2, 3]), record([1, 2]), {"tokens": 3})
    assert "fewer than the 5 compared" in mismatch(record([1, 2]), record([1, 2]), {"tokens": 5})


def test_logits_within_the_tolerance_pass_and_beyond_it_fail() -> None:
    tol = {"logits": {"atol": 0.01, "rtol": 0.0}}
    assert mismatch(record([0.5, 1.0]), record([0.505, 0.995]), tol) is None
    reason = mismatch(record([0.5, 1.0]), record([0.5, 1.1]), tol)
    assert reason is not None and reason.startswith("1 of 2 logits differ") and "at index 1" in reason
    assert "shape" in mismatch(record([0.5, 1.0]), record([0.5, 1.0], [1, 2]), tol)
    assert mismatch(record([math.nan]), record([math.nan]), tol) is None
    assert mismatch(record([1.0]), record([math.inf]), tol) is not None
