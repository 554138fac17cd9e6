"""The change-point rule on series whose truth is known by construction: steps found where they are and sized,
a step below the threshold and pure noise left alone, an acknowledgement attached to its change point."""

from __future__ import annotations

import random

from kforge_bot.history.changes import change_points
from kforge_bot.history.series import Point, Series


def series(values: list[float], threshold: float = 0.03) -> Series:
    s = Series("k", "k", "shape set 0", "cpu", "cpu-x", "relative", threshold)
    s.points = [Point(f"{i:040x}", f"commit {i}", v, None, v, 1.0, {}) for i, v in enumerate(values)]
    return s


def noisy(levels: list[float], sigma: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, sigma)) for level in levels]


def test_two_steps_are_found_at_their_commits_with_their_sizes() -> None:
    values = noisy([1.0] * 10 + [1.25] * 10 + [1.325] * 10, 0.01, seed=3)
    found = change_points(series(values))
    assert [c.index for c in found] == [10, 20]
    assert abs(found[0].size - 0.25) < 0.03 and abs(found[1].size - 0.06) < 0.02
    assert all(c.regression for c in found)


def test_a_step_below_the_threshold_and_pure_noise_raise_nothing() -> None:
    for seed in range(20):
        assert change_points(series(noisy([1.0] * 30, 0.02, seed))) == []
    assert change_points(series(noisy([1.0] * 15 + [1.02] * 15, 0.003, seed=1))) == []  # real, but under 3%


def test_an_acknowledgement_marks_its_change_point() -> None:
    values = noisy([1.0] * 10 + [0.8] * 10, 0.01, seed=5)
    [change] = change_points(series(values))
    assert not change.regression and change.id == f"k@{change.commit[:12]}"
    ack = {"id": change.id, "by": "ada", "reason": "why"}
    [marked] = change_points(series(values), {change.id: ack})
    assert marked.acknowledged == ack
