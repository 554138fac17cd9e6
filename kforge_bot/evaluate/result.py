"""The result of one evaluation: plain data that round-trips through JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

VERDICTS = ("pass", "incorrect", "rejected", "compile_error", "crash", "timeout")


@dataclass
class TimingStats:
    """One implementation's times (milliseconds per call) in one interleaved measurement."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    samples: int

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median."""
        return (self.q3_ms - self.q1_ms) / self.median_ms if self.median_ms > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["spread"] = self.spread
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TimingStats:
        return cls(**{k: data[k] for k in ("median_ms", "q1_ms", "q3_ms", "min_ms", "samples")})


@dataclass
class EvalSettings:
    """How hard to look. Defaults suit `check`; the loop and the gate pass their own."""

    seeds: int | None = None  # None: the spec's own
    time_budget_s: float = 3.0  # adaptive timing stops here at the latest
    target_precision: float = 0.005  # ... or once the speedup CI half-width is below this (relative)
    min_pairs: int = 30  # fewer pairs, stopped early on a tight interval, undercovered A/A runs on the H200
    max_pairs: int = 2000
    confidence: float = 0.95
    warmup_ms: float = 50.0
    rotate_sets: int = 3  # distinct input sets cycled through during timing
    short_kernel_sets: int = 8  # ... on a GPU, for a problem small enough to be timed several calls a sample (plan)
    timeout_s: float = 300.0  # whole child process, compilation included
    stall_floor_s: float = 30.0  # once built, a candidate silent for max(this, 50x the reference's slowest case) is hung
    measure: bool = True  # False: correctness only
    allow_framework_fallback: bool = False
    profile: bool = True
    isolation: str = "preferred"  # required | preferred | off: the OS sandbox for every worker (evaluate.isolation)
    # Each worker's limits (evaluate.limits, where the defaults are): None takes the default.
    memory_limit_bytes: int | None = None  # per process; by default on cpu and mps only
    process_limit: int | None = None  # processes and threads in one sandbox
    cpu_limit_s: float | None = None  # per process
    scratch_limit_bytes: int | None = None  # the scratch folder in all, any one file, each private tmpfs

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalSettings:
        return cls(**data)

    def key_material(self) -> dict[str, Any]:
        """What a cached result depends on: `isolation` decides whether user code may run at all, not what a
        run measures, so a gate in Actions (required) and one on a laptop (preferred) share entries."""
        return {k: v for k, v in self.to_dict().items() if k != "isolation"}


@dataclass
class EvalResult:
    verdict: str
    reason: str
    target: str
    device_name: str = ""
    baseline: TimingStats | None = None
    candidate: TimingStats | None = None
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    correctness: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    target_info: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)  # logs tail, phases, wall times
    cached: bool = False

    @property
    def correct(self) -> bool:
        return self.verdict == "pass"

    @property
    def faster(self) -> bool:
        """Faster with confidence: the whole interval lies above 1."""
        return self.correct and self.speedup_ci is not None and self.speedup_ci[0] > 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "correct": self.correct,
            "reason": self.reason,
            "target": self.target,
            "device_name": self.device_name,
            "baseline": self.baseline.to_dict() if self.baseline else None,
            "candidate": self.candidate.to_dict() if self.candidate else None,
            "speedup": self.speedup,
            "speedup_ci": list(self.speedup_ci) if self.speedup_ci else None,
            "correctness": self.correctness,
            "profile": self.profile,
            "target_info": self.target_info,
            "details": self.details,
            "cached": self.cached,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        return cls(
            verdict=data["verdict"],
            reason=data["reason"],
            target=data["target"],
            device_name=data.get("device_name", ""),
            baseline=TimingStats.from_dict(data["baseline"]) if data.get("baseline") else None,
            candidate=TimingStats.from_dict(data["candidate"]) if data.get("candidate") else None,
            speedup=data.get("speedup"),
            speedup_ci=tuple(data["speedup_ci"]) if data.get("speedup_ci") else None,
            correctness=data.get("correctness", {}),
            profile=data.get("profile", {}),
            target_info=data.get("target_info", {}),
            details=data.get("details", {}),
            cached=data.get("cached", False),
        )
