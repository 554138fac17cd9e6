"""Statistics on paired timings: pure functions, no torch.

Baseline and candidate are timed in alternating pairs, so each pair shares the machine's state at that
moment and slow drift cancels in the ratio. The speedup is the median of the per-pair ratios
baseline/candidate; its confidence interval comes from order statistics of those ratios (the
distribution-free interval for a median), so no normality is assumed and single outliers cannot move it.
Across a few independent runs (a workload's rounds, each on a fresh pair of processes) there are too few ratios for
that: `ratio_of_processes` takes their logarithms as normal and gives a Student t interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from kforge_bot.evaluate.wire.result import TimingStats


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values."""
    if not sorted_values:
        raise ValueError("no values")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(times_ms: Sequence[float]) -> TimingStats:
    values = sorted(times_ms)
    return TimingStats(
        median_ms=quantile(values, 0.5),
        q1_ms=quantile(values, 0.25),
        q3_ms=quantile(values, 0.75),
        min_ms=values[0],
        samples=len(values),
    )


def _binomial_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), computed in log space so large n does not overflow."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    log_half_n = -n * math.log(2.0)
    total = 0.0
    for i in range(k + 1):
        total += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half_n)
    return min(total, 1.0)


def _order_statistic_rank(n: int, confidence: float) -> int:
    """Largest k (1-based) with P(X < k) <= alpha/2: the interval [x_(k), x_(n-k+1)] covers the median.

    0 when even the full range [x_(1), x_(n)] covers the median less often than `confidence` asks.
    """
    alpha = 1.0 - confidence
    if n > 300:
        # Normal approximation to the binomial; exact sums get slow and the approximation is excellent here.
        z = _z(1.0 - alpha / 2)
        return max(1, int(math.floor(n / 2 - z * math.sqrt(n) / 2)))
    k = 0
    while k + 1 <= n and _binomial_cdf(k, n) <= alpha / 2:
        k += 1
    return k


def _z(p: float) -> float:
    """Inverse standard normal CDF (Acklam's rational approximation; |error| < 1.2e-9)."""
    a = [-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
         -3.066479806614716e01, 2.506628277459239e00]
    b = [-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
         -1.328068155288572e01]
    c = [-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
         4.374664141464968e00, 2.938163982698783e00]
    d = [7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00]
    if p < 0.02425:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    if p > 1 - 0.02425:
        return -_z(1 - p)
    q = p - 0.5
    r = q * q
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


def median_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(median, low, high): a distribution-free confidence interval for the median.

    With too few values for any interval at `confidence` (fewer than 6 at 95%, 11 at 99.9%) the interval
    is (-inf, inf): the range of, say, two values covers the median only half the time.
    """
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("no values")
    median = quantile(ordered, 0.5)
    k = _order_statistic_rank(n, confidence)
    if k == 0:
        return median, -math.inf, math.inf
    return median, ordered[k - 1], ordered[n - k]


def speedup_from_pairs(baseline_ms: Sequence[float], candidate_ms: Sequence[float],
                       confidence: float = 0.95) -> tuple[float, tuple[float, float]]:
    """Median of per-pair ratios baseline/candidate, and its confidence interval."""
    if len(baseline_ms) != len(candidate_ms) or not baseline_ms:
        raise ValueError("need equally many baseline and candidate times, at least one")
    ratios = [b / c for b, c in zip(baseline_ms, candidate_ms) if c > 0 and b > 0]
    if not ratios:
        raise ValueError("no positive time pairs")
    median, low, high = median_ci(ratios, confidence)
    return median, (low, high)


def ratio_of_processes(ratios: Sequence[float], confidence: float = 0.95) -> tuple[float, tuple[float, float]]:
    """The geometric mean of independent runs' ratios (each a fresh pair of processes) and its Student t interval
    on the log scale: the runs' spread, a process's own speed included, is what the interval is made of."""
    logs = [math.log(r) for r in ratios if r > 0]
    if len(logs) < 2:
        raise ValueError("need two positive ratios at least")
    mean = statistics.fmean(logs)
    half = t_quantile(confidence, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), (math.exp(mean - half), math.exp(mean + half))


def t_quantile(confidence: float, df: int) -> float:
    """t such that P(|T| < t) = `confidence` for Student's t with `df` degrees of freedom (closed forms of the
    distribution for whole degrees, Abramowitz and Stegun 26.7.3-4, solved by bisection)."""
    if df < 1 or not 0 < confidence < 1:
        raise ValueError("need df >= 1 and 0 < confidence < 1")

    def inside(t: float) -> float:  # P(|T| < t)
        theta = math.atan(t / math.sqrt(df))
        c2, term, total = math.cos(theta) ** 2, 1.0, 1.0
        if df % 2 == 0:
            for k in range(1, df // 2):
                term *= c2 * (2 * k - 1) / (2 * k)
                total += term
            return math.sin(theta) * total
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / math.pi * (theta + (math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0))

    low, high = 0.0, 1.0
    while inside(high) < confidence:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if inside(mid) < confidence else (low, mid)
    return (low + high) / 2


def relative_half_width(ci: tuple[float, float], center: float) -> float:
    return (ci[1] - ci[0]) / (2 * center) if center > 0 else math.inf


# Between-run error the within-run interval cannot see (which process, which memory pages, clock state).
# Calibrated from A/A runs on an H200 (benchmarks/results/harness_resolution.md, 2026-11-29): A/A intervals
# missed 1.0 by up to 0.08% for samples of one ~1 ms call, and by up to 0.35% for short kernels timed
# several calls per sample. The floors cover those misses, and fresh A/A runs confirmed them out of sample
# (runs 4 and 5 there: 10/10 at ~1 ms, 5/5 at ~25 us).
SYSTEMATIC_FLOOR_LONG = 0.001
SYSTEMATIC_FLOOR_SHORT = 0.004


def systematic_floor(calls_per_sample: int) -> float:
    return SYSTEMATIC_FLOOR_LONG if calls_per_sample <= 1 else SYSTEMATIC_FLOOR_SHORT


def widen(ci: tuple[float, float], floor: float) -> tuple[float, float]:
    """The interval widened multiplicatively by a relative systematic error `floor` on each side."""
    return ci[0] / (1.0 + floor), ci[1] * (1.0 + floor)
