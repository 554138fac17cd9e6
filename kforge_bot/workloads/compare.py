"""Whether the head's workload output matches the base's: the first N greedy tokens exactly, or the logits within
a tolerance. Pure functions of the outputs' plain records (kforge_bot.workloads.worker.output_record)."""

from __future__ import annotations

import math
from typing import Any


def mismatch(base: dict[str, Any], head: dict[str, Any], compare: dict[str, Any]) -> str | None:
    """None where the head's output matches the base's under `compare`, else the one-line reason."""
    if "tokens" in compare:
        n = int(compare["tokens"])
        want, got = [int(v) for v in base["values"][:n]], [int(v) for v in head["values"][:n]]
        if len(want) < n:
            return f"the base produced {len(want)} tokens, fewer than the {n} compared"
        if got != want:
            first = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), len(got))
            shown = (f"base {want[first]}, head {got[first]}" if first < len(got)
                     else f"the head produced only {len(got)}")
            return f"the greedy tokens differ from the base's at position {first} of {n} ({shown})"
        return None
    if base["shape"] != head["shape"]:
        return f"the output's shape is {head['shape']}, the base's {base['shape']}"
    atol, rtol = compare["logits"]["atol"], compare["logits"]["rtol"]
    worst, where, bad = 0.0, -1, 0
    for i, (a, b) in enumerate(zip(base["values"], head["values"])):
        error = abs(a - b)
        finite = math.isfinite(a) and math.isfinite(b)
        if not finite and not (a == b or (math.isnan(a) and math.isnan(b))) or error > atol + rtol * abs(a):
            bad += 1
            if not finite or error > worst:
                worst, where = (math.inf if not finite else error), i
    if bad:
        return (f"{bad} of {len(base['values'])} logits differ from the base's beyond atol {atol:g}, rtol {rtol:g} "
                f"(largest difference {worst:.3g} at index {where})")
    return None
