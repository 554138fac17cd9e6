"""The fastest time the hardware allows for one call: a measured candidate below it is a harness bug or a
cheat, never a speedup.

A call must read its inputs and write its outputs at least once (the compulsory traffic); at the device's
peak memory bandwidth that takes `bytes / bandwidth`. The peak used is the larger of the runner's
datasheet figure and this machine's measured copy bandwidth (doctor --save), so the floor is generous:
a real kernel sits above it. It holds only where the traffic really comes from device memory: the timer
flushes the last-level cache before each sample, so it applies when a sample is one call, or when the
rotated input sets together are well over the cache (the calls of a sample then cannot share it).
Arithmetic is not bounded here: the FLOPs of an arbitrary reference are not known. GPUs only (a CPU's
caches serve more than its DRAM bandwidth suggests), unless $KFORGE_CEILINGS names a ceilings file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from kforge_bot import hardware

SLACK = 0.9  # a candidate may beat the floor by this much (clock boost, the ceiling's measurement error)
LARGE_GAIN = 10.0  # KernelBench's habit: gains this large are flagged for a human, not failed
ENV_CEILINGS = "KFORGE_CEILINGS"  # a ceilings file to use instead of the saved or datasheet figures


@dataclass(frozen=True)
class Floor:
    shape: int
    bytes: int
    bandwidth_gbs: float
    source: str

    @property
    def ms(self) -> float:
        return self.bytes / (self.bandwidth_gbs * 1e9) * 1e3


def peak_bandwidth_gbs(kind: str, device_name: str) -> tuple[float, str] | None:
    """The most generous bandwidth known for this device: max(datasheet, measured), with where it came from."""
    found: list[tuple[float, str]] = []
    override = os.environ.get(ENV_CEILINGS)
    if override:
        ceilings = hardware.load_ceilings(override)
        return (ceilings.bandwidth_gbs, f"{ENV_CEILINGS}={override}") if ceilings.bandwidth_gbs else None
    measured = hardware.ceilings_for(kind, device_name)
    if measured is not None and measured.bandwidth_gbs:
        found.append((measured.bandwidth_gbs, f"{measured.origin} ({measured.source})"))
    runner = hardware.facts_for(kind, device_name)
    sheet = runner.datasheet_ceilings() if runner else None
    if sheet is not None and sheet.bandwidth_gbs:
        found.append((sheet.bandwidth_gbs, f"{runner.name} datasheet"))  # type: ignore[union-attr]
    return max(found) if found else None


def floors(kind: str, device_name: str, cache_bytes: int | None, traffic: list[int | None],
           calls_per_sample: list[int], rotations: int) -> list[Floor]:
    """Per shape set, the floor where it holds (see the module's docstring)."""
    if kind == "cpu" and not os.environ.get(ENV_CEILINGS):
        return []  # CPU caches (tens of MB, flushed imperfectly) serve data faster than DRAM: no honest floor
    peak = peak_bandwidth_gbs(kind, device_name)
    if peak is None:
        return []
    out = []
    for shape, (nbytes, k) in enumerate(zip(traffic, calls_per_sample)):
        if not nbytes:
            continue
        if k > 1 and (cache_bytes is None or rotations * nbytes <= 2 * cache_bytes):
            continue  # the calls of one sample may be served from the cache
        out.append(Floor(shape, nbytes, peak[0], peak[1]))
    return out


def violation(floor: Floor, candidate_ms: float) -> str | None:
    if candidate_ms >= floor.ms * SLACK:
        return None
    return (f"shape set {floor.shape}: measured {candidate_ms * 1e3:.2f} us per call, below the hardware's floor "
            f"of {floor.ms * 1e3:.2f} us ({floor.bytes / 1e6:.1f} MB of compulsory traffic at "
            f"{floor.bandwidth_gbs:g} GB/s, "
            f"{floor.source}): no kernel moves its data that fast, so the timing is not of the work (a cached or "
            "skipped computation, or work the timer does not see)")


def tensor_bytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if hasattr(v, "element_size"))
