"""Change points in a series: the `ruptures` library finds them (PELT, least-squares cost, on the log of the
values: a step of x% is the same size at every level); the policy's threshold keeps those that matter.

The penalty of a new segment is PENALTY times the noise's variance times log(points) (a BIC-like penalty; the noise
is read from the series itself, the median absolute difference of successive points, so a step does not inflate it).
A change point's size is the ratio of the medians of the segments on each side; one smaller than the kernel's gate
threshold is dropped. Its interval and its confirmation come from re-measuring (confirm.py): a detection alone is
a candidate. PENALTY and the minimum segment were chosen on A/A histories (benchmarks/history_false_alarms.py).
"""

from __future__ import annotations

import hashlib
import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from kforge_bot.errors import KforgeError
from kforge_bot.history.series import Series

PENALTY = 4.0
MIN_SEGMENT = 3  # points: a change must hold for three commits before it is one
NOISE_FLOOR = 0.002  # log units: a series quieter than this is treated as this noisy (no alarm on a 0.1% wobble)


@dataclass
class ChangePoint:
    kernel: str
    name: str
    part: str
    target: str
    runner: str
    index: int  # the first point after the change
    commit: str  # that point's commit: where the series says the change happened (bisect names the exact one)
    subject: str
    before: float  # the median of the segment before
    after: float
    size: float  # after / before - 1 (positive: slower)
    threshold: float
    acknowledged: dict[str, Any] | None = None

    @property
    def id(self) -> str:
        """'<kernel>@<commit's first 12>': what an acknowledgement names."""
        return change_id(self.kernel, self.commit)

    @property
    def regression(self) -> bool:
        return self.size > 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "id": self.id, "regression": self.regression}


def change_id(kernel: str, commit: str) -> str:
    return f"{kernel}@{commit[:12]}"


def fingerprint(change: ChangePoint) -> str:
    """A stable token for one change point of one series (the alert issue's marker)."""
    text = f"{change.kernel}|{change.part}|{change.target}|{change.runner}|{change.commit}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def breakpoints(values: list[float], penalty: float = PENALTY, min_size: int = MIN_SEGMENT) -> list[int]:
    """Indices where a new level starts (ruptures' PELT on log values)."""
    import numpy as np

    try:
        import ruptures
    except ImportError:
        raise KforgeError("finding change points needs the ruptures library",
                          hint="pip install 'kforge-bot[history]'") from None

    if len(values) < 2 * min_size:
        return []
    signal = np.log(np.asarray(values, dtype=float)).reshape(-1, 1)
    steps = np.abs(np.diff(signal[:, 0]))
    noise = max(float(np.median(steps)) / (0.6745 * math.sqrt(2.0)), NOISE_FLOOR)
    found = ruptures.Pelt(model="l2", min_size=min_size, jump=1).fit(signal).predict(
        pen=penalty * noise * noise * math.log(len(values)))
    return [int(b) for b in found if b < len(values)]


def change_points(series: Series, acks: dict[str, dict[str, Any]] | None = None,
                  penalty: float = PENALTY) -> list[ChangePoint]:
    """The change points of one series whose size is past its threshold, each with its acknowledgement if any."""
    values = [p.value for p in series.points]
    cuts = breakpoints(values, penalty)
    bounds = [0, *cuts, len(values)]
    out = []
    for i, cut in enumerate(cuts):
        before = statistics.median(values[bounds[i]:cut])
        after = statistics.median(values[cut:bounds[i + 2]])
        size = after / before - 1.0
        if abs(size) <= series.threshold:
            continue
        point = series.points[cut]
        change = ChangePoint(series.kernel, series.name, series.part, series.target, series.runner, cut, point.commit,
                             point.subject, before, after, size, series.threshold)
        change.acknowledged = (acks or {}).get(change.id)
        out.append(change)
    return out
