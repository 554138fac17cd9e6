"""Statistics on paired timings: quantiles, the median's distribution-free interval, and its coverage."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from kforge_bot.evaluate.wire.result import TimingStats
from kforge_bot.evaluate.wire.stats import (
    _binomial_cdf,
    _order_statistic_rank,
    _z,
    median_ci,
    quantile,
    relative_half_width,
    speedup_from_pairs,
    summarize,
)


def test_quantile_interpolates_linearly() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert quantile(values, 0.0) == 1.0
    assert quantile(values, 1.0) == 4.0
    assert quantile(values, 0.5) == 2.5
    assert quantile(values, 0.25) == pytest.approx(1.75)
    assert quantile([7.0], 0.3) == 7.0
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_summarize_reports_median_quartiles_and_spread() -> None:
    stats = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (stats.median_ms, stats.q1_ms, stats.q3_ms, stats.min_ms, stats.samples) == (3.0, 2.0, 4.0, 1.0, 5)
    assert stats.spread == pytest.approx(2.0 / 3.0)
    assert TimingStats.from_dict(stats.to_dict()) == stats
    assert math.isnan(TimingStats(0.0, 0.0, 0.0, 0.0, 1).spread)


def test_normal_quantile_matches_the_standard_library() -> None:
    normal = statistics.NormalDist()
    for p in (0.001, 0.01, 0.02, 0.025, 0.3, 0.5, 0.8, 0.975, 0.99, 0.999):
        assert _z(p) == pytest.approx(normal.inv_cdf(p), abs=1e-7)


def test_binomial_cdf_edges_and_symmetry() -> None:
    assert _binomial_cdf(-1, 10) == 0.0
    assert _binomial_cdf(10, 10) == 1.0
    assert _binomial_cdf(0, 10) == pytest.approx(2.0 ** -10)
    assert _binomial_cdf(4, 9) == pytest.approx(0.5)
    # large n in log space does not overflow
    assert 0.0 < _binomial_cdf(400, 1000) < 1e-9


def test_order_statistic_rank_matches_published_tables() -> None:
    # Distribution-free 95% interval for the median: n=100 -> [x(40), x(61)]; n=20 -> [x(6), x(15)]
    assert _order_statistic_rank(100, 0.95) == 40
    assert _order_statistic_rank(20, 0.95) == 6
    assert _order_statistic_rank(6, 0.95) == 1
    assert _order_statistic_rank(5, 0.95) == 0  # not even the full range reaches 95%
    # the normal approximation beyond 300 continues the exact ranks smoothly
    assert abs(_order_statistic_rank(301, 0.95) - _order_statistic_rank(300, 0.95)) <= 1
    ranks = [_order_statistic_rank(n, 0.95) for n in range(6, 600, 7)]
    assert ranks == sorted(ranks)


def test_median_ci_edge_cases() -> None:
    with pytest.raises(ValueError):
        median_ci([])
    # too few values for any 95% interval (the range of five covers the median only 94% of the time):
    # no interval at all rather than an overconfident one
    for few in ([2.0], [3.0, 1.0, 2.0], [1.0, 2.0, 3.0, 4.0, 5.0]):
        median, low, high = median_ci(few)
        assert median == statistics.median(few) and (low, high) == (-math.inf, math.inf)
    assert median_ci([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == (3.5, 1.0, 6.0)  # six reach 96.9%
    # a stricter confidence needs more values: 10 are not enough at 99.9%, 11 are
    assert median_ci([float(i) for i in range(10)], 0.999)[1] == -math.inf
    assert median_ci([float(i) for i in range(11)], 0.999)[1:] == (0.0, 10.0)
    median, low, high = median_ci([float(i) for i in range(1, 101)])
    assert (median, low, high) == (50.5, 40.0, 61.0)
    assert median_ci([1.0] * 50) == (1.0, 1.0, 1.0)


def test_speedup_from_pairs_and_its_errors() -> None:
    speedup, (low, high) = speedup_from_pairs([2.0] * 10, [1.0] * 10)
    assert speedup == low == high == 2.0
    # two pairs cannot resolve anything, however far apart they look
    assert speedup_from_pairs([2.0, 2.1], [1.0, 1.0])[1] == (-math.inf, math.inf)
    with pytest.raises(ValueError):
        speedup_from_pairs([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        speedup_from_pairs([], [])
    with pytest.raises(ValueError):
        speedup_from_pairs([1.0, 1.0], [0.0, 0.0])
    # a pair with a zero time is dropped, not divided by
    assert speedup_from_pairs([1.0, 3.0, 3.0], [0.0, 1.0, 1.0])[0] == 3.0
    assert speedup_from_pairs([1.0] + [3.0] * 6, [0.0] + [1.0] * 6)[1] == (3.0, 3.0)
    assert relative_half_width((0.9, 1.1), 1.0) == pytest.approx(0.1)
    assert relative_half_width((0.9, 1.1), 0.0) == math.inf


def test_one_outlier_cannot_move_the_interval() -> None:
    base = [1.0 + 0.001 * (i % 7) for i in range(40)]
    cand = [1.0] * 40
    clean = speedup_from_pairs(base, cand)
    cand[5] = 1000.0  # one pair where the machine stalled
    dirty = speedup_from_pairs(base, cand)
    assert dirty[0] == pytest.approx(clean[0], rel=2e-3)
    assert dirty[1][1] == pytest.approx(clean[1][1], rel=2e-3)


def _paired_samples(rng: random.Random, n: int, true_speedup: float, noise: float) -> tuple[list[float], list[float]]:
    """Pairs sharing a drifting machine state, each side with its own lognormal noise."""
    baseline, candidate = [], []
    for i in range(n):
        drift = 1.0 + 0.2 * math.sin(i / 7.0)  # slow drift: the pairing should cancel it
        baseline.append(true_speedup * drift * math.exp(rng.gauss(0.0, noise)))
        candidate.append(drift * math.exp(rng.gauss(0.0, noise)))
    return baseline, candidate


@pytest.mark.parametrize("pairs", [6, 10, 30, 120, 400])
def test_aa_interval_contains_one_about_95_percent_of_the_time(pairs: int) -> None:
    rng = random.Random(1234 + pairs)
    trials = 1500 if pairs <= 120 else 600
    covered = 0
    for _ in range(trials):
        b, c = _paired_samples(rng, pairs, 1.0, noise=0.03)
        _, (low, high) = speedup_from_pairs(b, c, 0.95)
        covered += low <= 1.0 <= high
    rate = covered / trials
    # The order-statistic interval is exact-or-conservative: never much below 95%, not wildly above.
    assert 0.93 <= rate <= 0.995, rate


def test_a_99_percent_interval_covers_more_often() -> None:
    rng = random.Random(99)
    covered95 = covered99 = 0
    for _ in range(1000):
        b, c = _paired_samples(rng, 40, 1.0, noise=0.05)
        covered95 += speedup_from_pairs(b, c, 0.95)[1][0] <= 1.0 <= speedup_from_pairs(b, c, 0.95)[1][1]
        low, high = speedup_from_pairs(b, c, 0.99)[1]
        covered99 += low <= 1.0 <= high
    assert covered99 > covered95
    assert covered99 / 1000 >= 0.98


def test_a_five_percent_difference_is_resolved_with_enough_pairs() -> None:
    rng = random.Random(7)
    resolved = 0
    for _ in range(200):
        b, c = _paired_samples(rng, 200, 1.05, noise=0.03)
        speedup, (low, high) = speedup_from_pairs(b, c)
        assert low <= speedup <= high
        resolved += low > 1.0
        assert 0.98 < speedup < 1.12
    assert resolved >= 195  # 200 noisy pairs resolve 5% essentially always


def test_too_few_pairs_never_claim_anything() -> None:
    rng = random.Random(8)
    for pairs in range(1, 6):
        b, c = _paired_samples(rng, pairs, 3.0, noise=0.01)  # even a 3x difference
        assert speedup_from_pairs(b, c)[1] == (-math.inf, math.inf)


def test_few_pairs_do_not_claim_to_resolve_a_small_difference() -> None:
    rng = random.Random(3)
    claimed = 0
    for _ in range(300):
        b, c = _paired_samples(rng, 8, 1.01, noise=0.05)
        claimed += speedup_from_pairs(b, c)[1][0] > 1.0
    assert claimed < 60  # 1% under 5% noise with 8 pairs: mostly unresolved (the interval is honest)


def test_slow_drift_cancels_in_the_paired_ratio() -> None:
    rng = random.Random(5)
    baseline, candidate = [], []
    for i in range(100):
        machine = 1.0 + i / 50.0  # the machine gets three times slower during the run
        baseline.append(2.0 * machine * math.exp(rng.gauss(0.0, 0.01)))
        candidate.append(machine * math.exp(rng.gauss(0.0, 0.01)))
    speedup, (low, high) = speedup_from_pairs(baseline, candidate)
    assert low <= 2.0 <= high and high - low < 0.05


def test_systematic_floor_covers_a_between_run_offset_the_within_run_interval_misses() -> None:
    from kforge_bot.evaluate.wire.stats import speedup_from_pairs, systematic_floor, widen

    rng = random.Random(7)
    # A/A: the candidate's process runs 0.05% faster for reasons that change run to run, tiny noise within.
    base = [1.0 + rng.gauss(0, 0.0002) for _ in range(200)]
    cand = [b / 1.0005 * (1 + rng.gauss(0, 0.0002)) for b in base]
    _, raw = speedup_from_pairs(base, cand)
    assert not raw[0] <= 1.0 <= raw[1]  # the within-run interval alone claims a difference
    low, high = widen(raw, systematic_floor(1))
    assert low <= 1.0 <= high
    # A real 1% slowdown stays resolved after widening.
    slow = [b * 1.01 * (1 + rng.gauss(0, 0.0002)) for b in base]
    _, raw_slow = speedup_from_pairs(base, slow)
    assert widen(raw_slow, systematic_floor(1))[1] < 1.0
    # Short kernels timed several calls per sample get the wider floor.
    assert systematic_floor(4) > systematic_floor(1)


def test_t_quantiles_are_the_tables_and_the_interval_of_runs_is_t_on_the_log_scale() -> None:
    from kforge_bot.evaluate.wire.stats import ratio_of_processes, t_quantile

    # Student's t, two-sided: the printed tables' values at 95% and 99%
    for df, t95, t99 in ((1, 12.706, 63.657), (2, 4.303, 9.925), (4, 2.776, 4.604), (30, 2.042, 2.750)):
        assert abs(t_quantile(0.95, df) - t95) < 1e-3 and abs(t_quantile(0.99, df) - t99) < 1e-3
    center, (low, high) = ratio_of_processes([0.9, 1.0, 1.1])
    logs = [math.log(r) for r in (0.9, 1.0, 1.1)]
    assert abs(center - math.exp(sum(logs) / 3)) < 1e-12
    assert abs(math.log(high) - math.log(center) - 4.303 * statistics.stdev(logs) / math.sqrt(3)) < 1e-3
    assert abs(math.log(center) - math.log(low) - (math.log(high) - math.log(center))) < 1e-12
    with pytest.raises(ValueError):
        ratio_of_processes([1.0])
