"""What an evaluation's `details` hold beside its verdict: one typed mapping, so every reader's key is one a type
checker knows.

A TypedDict, not a dataclass: `details` is written as it is into the result cache and the gate's JSON, and read
back from entries written before this type existed; a mapping keeps that JSON exactly as it was (only the keys
set are written, in the order they were set) and reads an old entry as it is. Every key is optional: which ones
an evaluation sets depends on how far it got (a crash has a log tail, a timed result its per-shape timing).
"""

from __future__ import annotations

from typing import Any, TypedDict


class Details(TypedDict, total=False):
    """An evaluation's details (EvalResult.details), by who writes them."""

    # The judge, on every worker's outcome (evaluate.judge).
    harness_version: str
    wall_s: float
    log_tail: str
    isolation: str  # how the worker was sandboxed, or why it was not
    input_bytes: list[int]  # per shape set, tensors only
    forged_lines: int  # lines on the result channel without the nonce
    restored_state: list[str]  # framework settings the candidate changed and the worker put back
    shared_with_baseline: list[str]  # weights both sides read from one place
    failed_side: str  # "baseline" or "candidate": whose code a crash or a timeout was in
    traceback: str
    large_gain: str  # a speedup over bound.LARGE_GAIN: worth a human look
    # Timing (evaluate.judge): one entry per timed shape set, the interval's confidence and notes on it.
    timing: list[dict[str, Any]]
    confidence: float
    speedup_ci_within_run: list[float] | None
    systematic_floor: float
    speedup_definition: str
    speedup_ci_note: str
    directions: dict[str, dict[str, Any]]  # a kernel with a backward: figures per direction (result.DIRECTIONS)
    conditions: dict[str, Any]  # the timing's conditions per shape set, and whether they disturbed it
    # The evaluation around the worker (evaluate.api).
    static_findings: list[str]  # why the static scan rejected the candidate before any worker ran
    memory_fit: dict[str, Any]  # wire.plan.Fit.to_dict: where the outputs were kept
    shipped_inputs: dict[str, int]  # evaluate.shipping.Stager.handed: recorded inputs sent as device memory, as files
    seeds: list[int]
    phases: dict[str, Any]  # where the wall time went, in the parent and in each worker
    # The commands and the loop, after the evaluation.
    baselines: dict[str, Any]  # the speedup against compiled baselines (evaluate.baselines.against_baselines)
    accepted_against: str  # the baseline an optimize run's acceptance was judged against
    disturbed_before: str  # the gate's first, disturbed timing's reason, where it timed again
    cache_key: str  # the result cache's key the optimize loop stored it under
    pool: dict[str, Any]  # the evaluation pool's slot and device that ran it
    language: str  # a candidate in a language the run does not accept
    slot_failure: str  # an evaluation slot that failed (the pool, the Ray executor) ...
    slot: int  # ... and which one
