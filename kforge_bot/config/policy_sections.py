"""The sections of a policy file below its top: `gate:` (with its rules, shape sets and workloads), `budgets:`,
`trust:` and `evaluation:` (with `disturbance:`), each a frozen dataclass whose defaults are the default policy's.
kforge_bot.config.policy parses a file into them."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from kforge_bot.config.repo_paths import path_matches

# The gate's default regression threshold per target kind: just above what an A/A run of the same code spreads
# over on that kind (GPUs: benchmarks/results/harness_resolution.md), wider on CPUs, whose wall time drifts on
# shared runners (benchmarks/results/gate_cpu.md).
DEFAULT_THRESHOLDS: dict[str, float] = {"cpu": 0.05, "cuda": 0.02, "xpu": 0.02, "mps": 0.02}

@dataclass(frozen=True)
class ShapeSetSpec:
    """One entry of a gate rule's `shape_sets`: how one shape set (by its index in the kernel's shapes) is judged.
    Every command applies it (kforge_bot.evaluate.wire.shapes): the gate, optimize's acceptance and check's reason."""

    index: int
    threshold: dict[str, float] | None = None  # by target kind; kinds left out take the rule's threshold
    informational: bool = False  # reported, never a regression
    reason: str | None = None


@dataclass(frozen=True)
class RuleSpec:
    """One entry of `gate.rules`: applies when `path` and/or `kernel` match (first match wins)."""

    path: str | None = None
    kernel: str | None = None
    threshold: dict[str, float] | None = None  # by target kind; kinds left out take gate.threshold's
    confidence: float | None = None
    skip: bool | None = None
    reason: str | None = None
    shape_sets: tuple[ShapeSetSpec, ...] = ()

    def matches(self, kernel_name: str, path: str) -> bool:
        if self.path is not None and not path_matches(self.path, path):
            return False
        if self.kernel is not None and not fnmatch.fnmatchcase(kernel_name, self.kernel):
            return False
        return True

    def describe(self) -> str:
        parts = [f"path '{self.path}'" if self.path else "", f"kernel '{self.kernel}'" if self.kernel else ""]
        return " and ".join(p for p in parts if p)


@dataclass(frozen=True)
class GateRule:
    """The effective gate settings for one kernel."""

    threshold: float  # relative slowdown that counts as a regression (0.02 = 2%), for `target`
    confidence: float  # confidence required before calling a regression
    skip: bool = False
    reason: str | None = None
    matched: str = "gate defaults"  # which rule applied, for the gate's report
    target: str | None = None  # the target kind the threshold is for (None: the strictest of all)
    threshold_from: str = "gate.threshold"  # the policy key the threshold came from, for the report
    shape_thresholds: dict[int, float] = field(default_factory=dict)  # per shape set, over `threshold`
    informational_shapes: tuple[int, ...] = ()  # shape sets reported, never a regression

    def shape_settings(self) -> dict[str, Any]:
        """The rule as EvalSettings fields, so every command judges shape sets by it (kforge_bot.evaluate.wire.shapes):
        `dataclasses.replace(settings, **rule.shape_settings())`."""
        return {"regression_threshold": self.threshold, "shape_thresholds": dict(self.shape_thresholds),
                "informational_shapes": tuple(self.informational_shapes)}


@dataclass(frozen=True)
class WorkloadGate:
    """`gate.workloads`: how the gate judges a workload (kforge_bot.workloads): its own threshold per target kind,
    the interval's half-width it measures to (None: a quarter of the threshold, 0.1% to 0.5%), the sample pairs it
    may spend, the seconds, how long one sample's calls run at least, and the rounds (each a fresh pair of
    processes) they are spread over."""

    threshold: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    precision: float | None = None
    min_pairs: int = 6  # the fewest paired ratios with a 95% interval for their median
    max_pairs: int = 40
    budget_s: float = 300.0
    sample_s: float = 0.5  # many calls a sample: a fresh process's first moments and the clock's grain stay out
    processes: int = 3  # rounds, each a fresh pair of processes: the interval is over them, a process's own speed

    def threshold_for(self, kind: str) -> float:
        return self.threshold[kind]

    def precision_for(self, kind: str) -> float:
        return self.precision if self.precision is not None else min(0.005, max(self.threshold[kind] / 4, 0.001))


@dataclass(frozen=True)
class Gate:
    threshold: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))  # every kind
    confidence: float = 0.95
    rules: tuple[RuleSpec, ...] = ()
    # A required target this run cannot measure (e.g. cuda on a CPU-only runner) fails the gate
    # instead of being reported as skipped.
    require_all_targets: bool = False
    # A run in which every changed kernel was skipped (none could be measured here) checked nothing: "fail" (a CI
    # job set up on the wrong machine must not stay green) or "pass".
    all_skipped: str = "fail"
    # A timing that decided nothing (disturbed twice, or straddling the threshold after its confirmation run):
    # "fail" or "pass" (evaluate.wire.conditions, docs/inconclusive.md).
    inconclusive: str = "fail"
    workloads: WorkloadGate = field(default_factory=WorkloadGate)


@dataclass(frozen=True)
class Budgets:
    """What one optimize run may spend over all its sessions (a resumed run continues the same budgets), and
    when it stops early. The one type and the one set of defaults for the policy's `budgets:`, `optimize`,
    the PR bot and code that starts a run itself (kforge_bot.optimize.run.RunConfig): the defaults are the
    default policy's (policies/default.yml, a test keeps them equal). None, from code: no limit (tokens,
    time_limit_s), the proposer's own patience (6 for the tuner, 4 for an LLM)."""

    iterations: int = 10
    tokens: int | None = 500_000
    time_limit_s: float | None = 3600.0  # the whole run's wall time (one evaluation's are Evaluation's)
    speed_of_light: float = 0.9  # stop once the hardware counters put the best kernel at this fraction of peak
    patience: int | None = None  # stop after this many candidates in a row without a new best; None: 6 (tuner), 4 (LLM)

    def limits(self) -> dict[str, Any]:
        """What the run may spend, as its trajectory records it (the start and session events)."""
        return {"iterations": self.iterations, "tokens": self.tokens, "time_limit_s": self.time_limit_s}


@dataclass(frozen=True)
class Trust:
    allowed_associations: tuple[str, ...] = ("OWNER", "MEMBER", "COLLABORATOR")
    trigger_label: str = "kforge:run"
    allow_forks: bool = False
    # A pull request that changes a kernel's test (reference, inputs, shapes, tolerance, seeds) is judged under
    # the base's test; under its own only once a maintainer adds this label.
    spec_change_label: str = "kforge:spec-change"


@dataclass(frozen=True)
class Disturbance:
    """How disturbed a timing may be and still count (evaluate.wire.conditions.Limits), as shares of the timed samples;
    None: the harness's default."""

    preempted_share: float | None = None  # a side's samples with an involuntary context switch
    preempted_gap: float | None = None  # ... more on one side than on the other
    crowded_share: float | None = None  # samples on a machine with more runnable tasks than cores
    wait_share: float | None = None  # a side's threads' runnable time spent waiting for a core (CPU targets)


@dataclass(frozen=True)
class Evaluation:
    """The policy's `evaluation:`, for ONE evaluation (a whole run's limits are Budgets)."""

    seeds: int | None = 3  # None (the quick look only): the kernel's own
    timing_budget_s: float = 10.0  # seconds of interleaved timing (its earlier key: time_budget_s)
    timeout_s: float = 300.0  # seconds before the worker is killed, compilation included
    # Each worker's limits (kforge_bot.evaluate.wire.limits has the defaults, used where these are None).
    memory_limit_gb: float | None = None
    process_limit: int | None = None
    cpu_limit_s: float | None = None
    scratch_limit_gb: float | None = None
    cpu_threads: int | None = None  # torch's and OpenMP's threads in every worker (runners that share cores)
    disturbance: Disturbance = field(default_factory=lambda: Disturbance())

    def limit_settings(self) -> dict[str, Any]:
        """These limits as EvalSettings' keyword arguments."""
        gib = 1 << 30
        return {"memory_limit_bytes": None if self.memory_limit_gb is None else int(self.memory_limit_gb * gib),
                "process_limit": self.process_limit, "cpu_limit_s": self.cpu_limit_s, "cpu_threads": self.cpu_threads,
                **{f"max_{name}": value for name, value in asdict_shallow(self.disturbance).items()},
                "scratch_limit_bytes": None if self.scratch_limit_gb is None else int(self.scratch_limit_gb * gib)}


def asdict_shallow(obj: Any) -> dict[str, Any]:
    return {f: getattr(obj, f) for f in obj.__dataclass_fields__}
