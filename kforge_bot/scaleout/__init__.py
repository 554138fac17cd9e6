"""Scaling out: many candidates evaluated at once (a pool of device slots on one host, `pool.py`, or Ray across
hosts, `ray_executor.py`).

Kept import-light: nothing here imports torch or ray at module level.
"""

from __future__ import annotations

from typing import Any


def make_pool(target: str, *, executor: str = "local", workers: int | None = None,
              ray_address: str | None = None) -> Any:
    """The evaluation pool for `target`: this host's devices ("local"), or a Ray cluster's ("ray")."""
    # Imported here, not at the top: a slot process imports this package (for scale.slots) before it pins its
    # device, and the pools' modules import evaluate's.
    if executor == "ray":
        from kforge_bot.scaleout.ray_executor import RayPool

        return RayPool(target, workers=workers, address=ray_address)
    from kforge_bot.scaleout.pool import EvalPool

    return EvalPool(target, workers=workers)
