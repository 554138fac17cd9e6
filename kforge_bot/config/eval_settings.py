"""How hard one evaluation looks (EvalSettings): a leaf, so that the policy can build the settings it decides
(kforge_bot.config.policy.Policy.eval_settings) without importing the harness that runs them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ShapeRule:
    """How one shape set is judged: the slowdown that counts as a regression, or informational (never one)."""

    threshold: float = 0.0
    informational: bool = False


@dataclass
class EvalSettings:
    """How hard to look. Defaults suit `check`; the loop and the gate pass their own."""

    seeds: int | None = None  # None: the spec's own
    # The times of ONE evaluation (a whole run's wall time is Budgets.time_limit_s, a pool slot's is
    # EvalPool.slot_deadline_s): timing_budget_s of interleaved timing, within a worker killed after timeout_s.
    timing_budget_s: float = 3.0  # adaptive timing stops here at the latest
    target_precision: float = 0.005  # ... or once the speedup CI half-width is below this (relative)
    min_pairs: int = 30  # fewer, stopped early on a tight interval, undercovered A/A (harness_resolution.md)
    max_pairs: int = 2000
    confidence: float = 0.95
    warmup_ms: float = 50.0
    rotate_sets: int = 3  # distinct input sets cycled through during timing
    short_kernel_sets: int = 8  # ... on a GPU, for a problem small enough to be timed several calls a sample (plan)
    timeout_s: float = 300.0  # the candidate's whole worker process, compilation included
    stall_floor_s: float = 30.0  # once built, a candidate silent for max(this, 50x the reference's slowest case) is hung
    measure: bool = True  # False: correctness only
    heldout: bool = True  # held-out shapes and values checked beside the listed ones (evaluate.wire.heldout)
    allow_framework_fallback: bool = False
    profile: bool = True
    isolation: str = "preferred"  # required | preferred | off: the OS sandbox for every worker (evaluate.isolation)
    # Each worker's limits (evaluate.wire.limits, where the defaults are): None takes the default.
    memory_limit_bytes: int | None = None  # per process; by default on cpu and mps only
    process_limit: int | None = None  # processes and threads in one sandbox
    cpu_limit_s: float | None = None  # per process
    scratch_limit_bytes: int | None = None  # the scratch folder in all, any one file, each private tmpfs
    # The one rule for every command (evaluate.wire.shapes): a shape set whose whole interval lies below
    # 1/(1+threshold) is a regression. The commands set these from the policy (gate.threshold, gate.rules).
    regression_threshold: float = 0.0
    shape_thresholds: dict[int, float] = field(default_factory=dict)  # per shape set (index), over the above
    informational_shapes: tuple[int, ...] = ()  # shape sets reported but never a regression
    # A timing is no verdict (`inconclusive`) beyond these (evaluate.wire.conditions; policy evaluation.disturbance):
    # the share of a side's samples preempted, the gap between the sides' shares, the share on a crowded machine,
    # the share of a side's runnable time spent waiting for a core.
    # None: evaluate.wire.conditions' defaults.
    max_preempted_share: float | None = None
    max_preempted_gap: float | None = None
    max_crowded_share: float | None = None
    max_wait_share: float | None = None
    cpu_threads: int | None = None  # torch's (and OpenMP's) threads in the workers; None: the framework's default
    # What the gate makes of an inconclusive timing after its retry (policy gate.inconclusive): fail | pass.
    inconclusive: str = "fail"

    def __post_init__(self) -> None:
        # Through JSON (the pool, the cache, the worker's plan) the keys come back as strings and tuples as lists.
        self.shape_thresholds = {int(k): float(v) for k, v in (self.shape_thresholds or {}).items()}
        self.informational_shapes = tuple(sorted({int(i) for i in self.informational_shapes or ()}))

    def seed_count(self, spec_seeds: int) -> int:
        """How many secret seeds one evaluation draws: these settings' count where set, else the spec's own."""
        return max(self.seeds or spec_seeds, 1)

    def shape_rule(self, index: int) -> ShapeRule:
        return ShapeRule(self.shape_thresholds.get(index, self.regression_threshold),
                         index in self.informational_shapes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalSettings:
        return cls(**data)

    def key_material(self) -> dict[str, Any]:
        """What a cached result depends on: `isolation` decides whether user code may run at all, not what a
        run measures, so a gate in Actions (required) and one on a laptop (preferred) share entries."""
        return {k: v for k, v in self.to_dict().items() if k != "isolation"}
