"""The result of one evaluation: plain data that round-trips through JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, cast

from kforge_bot.config.eval_settings import EvalSettings  # noqa: F401 - defined beside the policy that fills it
from kforge_bot.evaluate.wire.details import Details
from kforge_bot.evaluate.wire.shapes import ShapeSpeedup, from_timing, regressions

# inconclusive: correct, but its timing was disturbed (evaluate.wire.conditions): no verdict on its speed.
VERDICTS = ("pass", "incorrect", "rejected", "compile_error", "crash", "timeout", "inconclusive")
# A kernel with a backward is timed by direction (details.directions); the headline is forward+backward.
DIRECTIONS = ("forward", "backward", "forward+backward")


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
    details: Details = field(default_factory=lambda: Details())  # log tail, phases, timing (wire.details)
    cached: bool = False
    # Each shape set's speedup, interval and verdict (evaluate.wire.shapes); `speedup` is their geometric mean.
    per_shape: list[ShapeSpeedup] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return self.verdict == "pass"

    @property
    def regressions(self) -> list[ShapeSpeedup]:
        """The shape sets on which the candidate is slower by more than their threshold, with confidence."""
        return regressions(self.per_shape)

    @property
    def faster(self) -> bool:
        """Faster with confidence: the whole headline interval lies above 1, and no shape set regressed."""
        return (self.correct and self.speedup_ci is not None and self.speedup_ci[0] > 1.0
                and not self.regressions)

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
            "per_shape": [p.to_dict() for p in self.per_shape],
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
            details=cast(Details, data.get("details", {})),  # as written: an old entry keeps its keys
            cached=data.get("cached", False),
            per_shape=per_shape_of(data),
        )


def per_shape_of(data: dict[str, Any]) -> list[ShapeSpeedup]:
    """A result's shape sets; one written before results carried them is read from its timing details."""
    if "per_shape" in data:
        return [ShapeSpeedup.from_dict(p) for p in data.get("per_shape") or []]
    shapes = (data.get("correctness") or {}).get("shape_sets") or []
    return from_timing((data.get("details") or {}).get("timing") or [], shapes)


def directions_text(directions: dict[str, Any]) -> str:
    """'forward 1.020x (0.990-1.050), backward 0.870x (0.850-0.890), forward+backward ...' (the headline's)."""
    parts = []
    for name in DIRECTIONS:
        figures = directions.get(name)
        if figures and figures.get("speedup") is not None:
            ci = figures.get("speedup_ci")
            parts.append(f"{name} {figures['speedup']:.3f}x" + (f" ({ci[0]:.3f}-{ci[1]:.3f})" if ci else ""))
    return ", ".join(parts)


def case_breakdown(correctness: dict[str, Any]) -> str:
    """What the compared outputs were, so the count adds up: the seeds on each shape set, the same buffers
    refilled, the timed runs, and the checks after timing."""
    kinds = {"seed": 0, "again": 0, "timed": 0, "changed": 0, "moved": 0}
    for record in correctness.get("records", []):
        label = record["case"]
        kind = ("again" if "called again" in label else "timed" if label.startswith("timed run")
                else "changed" if "elements changed" in label else "moved" if "buffers" in label else "seed")
        kinds[kind] += 1
    seeds, shapes = len(correctness.get("seeds", [])), len(correctness.get("shape_sets", []))
    parts = [f"{kinds['seed']} = {seeds} seed(s) x {shapes} shape set(s)"]
    names = {"again": "same buffers refilled", "timed": "timed runs", "changed": "input elements changed",
             "moved": "inputs moved between buffers"}
    parts += [f"{kinds[k]} {names[k]}" for k in ("again", "timed", "changed", "moved") if kinds[k]]
    return ", ".join(parts)
