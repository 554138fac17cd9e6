"""Speedups per shape set (evaluate.wire.shapes): the one rule, the headline that combines the sets, and the result's
round trip through JSON."""

from __future__ import annotations

import json
import math

import pytest

from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.evaluate.wire.shapes import (ShapeSpeedup, combine, geomean_times, markdown_table, regression_bound,
                                        regression_text, shape_status)


def test_the_rule_is_one_interval_against_one_bound():
    t = 0.05
    assert shape_status((0.10, 0.20), t) == "regression"  # whole interval below 1/1.05
    assert shape_status((0.90, 0.99), t) == "uncertain"  # straddles 1/1.05: confirm
    assert shape_status((0.97, 1.04), t) == "pass"
    assert shape_status((1.06, 1.10), t) == "improved"
    assert shape_status(None, t) == "unmeasured"
    assert regression_bound(0.0) == 1.0 and shape_status((0.9, 0.99), 0.0) == "regression"


def test_the_headline_is_the_geometric_mean_with_the_sets_intervals_combined_on_the_log_scale():
    # One set: its own speedup and interval, unchanged.
    assert combine([2.0], [(1.8, 2.3)]) == (pytest.approx(2.0), (pytest.approx(1.8), pytest.approx(2.3)))
    # Two sets, 4x faster and 4x slower: the geometric mean is 1, not the median of the pooled pairs.
    center, (low, high) = combine([4.0, 0.25], [(3.6, 4.4), (0.2, 0.3)])
    assert center == pytest.approx(1.0)
    lower = math.sqrt(math.log(4 / 3.6) ** 2 + math.log(0.25 / 0.2) ** 2) / 2
    upper = math.sqrt(math.log(4.4 / 4) ** 2 + math.log(0.3 / 0.25) ** 2) / 2
    assert (low, high) == (pytest.approx(math.exp(-lower)), pytest.approx(math.exp(upper)))
    # n equally precise sets: the headline is about sqrt(n) times tighter on the log scale than each.
    center, (low, high) = combine([1.0] * 4, [(0.9, 1 / 0.9)] * 4)
    assert math.log(high) == pytest.approx(-math.log(0.9) / 2)
    assert combine([2.0, 3.0], [(1.9, 2.1), None]) == (pytest.approx(math.sqrt(6)), None)  # an unresolved set


def _set(index: int, speedup: float, ci: tuple[float, float], **rule: object) -> ShapeSpeedup:
    return ShapeSpeedup(index, {"n": 16 * (index + 1)}, speedup, ci, 1.0, 1.0 / speedup, 40, **rule)  # type: ignore[arg-type]


def test_a_set_is_a_regression_unless_informational_and_says_so():
    slow = _set(0, 0.1, (0.09, 0.11), threshold=0.05)
    assert slow.regressed and slow.verdict_text() == "regression (over 5.0% slower)"
    assert regression_text([slow, _set(1, 8.0, (7.0, 9.0))]) == \
        "a regression on shape set 0 (n=16): 0.100x (0.090-0.110), beyond the 5.0% threshold"
    quiet = _set(0, 0.1, (0.09, 0.11), threshold=0.05, informational=True)
    assert not quiet.regressed and quiet.verdict_text() == "informational" and regression_text([quiet]) == ""
    assert not _set(0, 0.9, (0.85, 0.95), threshold=0.2).regressed  # within its own, larger threshold
    table = markdown_table([slow])
    assert table.splitlines()[2] == ("| shape set 0 (n=16) | 1.000 ms | 10.000 ms | 0.100x (0.090-0.110) | 40 | "
                                     "regression (over 5.0% slower) |")


def test_the_medians_beside_the_headline_are_geometric_means():
    base, head = geomean_times([ShapeSpeedup(0, {}, 0.1, None, 1.0, 10.0, 30),
                                ShapeSpeedup(1, {}, 10.0, None, 100.0, 10.0, 30)])
    assert (base, head) == (pytest.approx(10.0), pytest.approx(10.0))  # sums would read 101 ms against 20 ms


def test_a_candidate_with_a_regressed_set_is_never_faster_and_results_round_trip():
    sets = [_set(0, 0.1, (0.09, 0.11), threshold=0.05), _set(1, 30.0, (25.0, 35.0), threshold=0.05)]
    result = EvalResult("pass", "ok", "cpu", speedup=1.7, speedup_ci=(1.2, 2.3), per_shape=sets)
    assert not result.faster and [p.shape_set for p in result.regressions] == [0]
    back = EvalResult.from_dict(result.to_dict())
    assert back.per_shape == sets and not back.faster
    assert EvalResult("pass", "ok", "cpu", speedup=1.7, speedup_ci=(1.2, 2.3), per_shape=sets[1:]).faster


def test_settings_carry_the_rule_through_json():
    settings = EvalSettings(regression_threshold=0.05, shape_thresholds={2: 0.5}, informational_shapes=(1,))
    back = EvalSettings.from_dict(json.loads(json.dumps(settings.to_dict())))
    assert back == settings
    assert (back.shape_rule(0).threshold, back.shape_rule(1).informational, back.shape_rule(2).threshold) == \
        (0.05, True, 0.5)
