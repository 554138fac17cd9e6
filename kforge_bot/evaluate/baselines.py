"""Baselines besides the kernel as written: the same code under torch.compile, and the speedups against each.

The field reports two yardsticks: PyTorch eager (the kernel as written, which every evaluation times the candidate
against) and torch.compile; the KForge paper's headline is the speedup over the faster of the two. A compiled
baseline is an implementation the harness generates (the baseline's own source with a wrapper that compiles it),
evaluated like any candidate against the eager baseline: its outputs are checked against the reference, and its
speedup over eager is measured in interleaved pairs. Compiling happens on the first call of each shape set, in the
correctness phase (build time: never timed, bounded by the whole --timeout rather than the no-progress limit).
A compiled baseline that fails to compile, or is wrong, is reported with its verdict and dropped: no figure is
given against it. The candidate's speedup against a compiled baseline is its speedup over eager divided by the
compiled baseline's over eager, per shape set, from two runs of the harness; its interval combines the two runs'
intervals (lowest over highest, highest over lowest), so it is wider than either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from kforge_bot.config.choices import EAGER
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec

# kind -> torch.compile mode. max-autotune without CUDA graphs: the harness replays both sides from its own CUDA
# graphs, and the graphs max-autotune would record inside a call cannot be captured into another.
COMPILE_MODES: dict[str, str | None] = {"compile": None, "compile-max-autotune": "max-autotune-no-cudagraphs"}
COMPILED_SYMBOL = "_KforgeCompiled"


def compiled_implementation(impl: Implementation, kind: str) -> Implementation:
    """`impl` under torch.compile: its source with a wrapper appended that compiles its entry (an nn.Module class's
    forward, per instance, or a function), so it loads, builds and is seeded exactly as the eager one."""
    mode = COMPILE_MODES[kind]
    wrapper = f"""

# --- kforge-bot: the code above under torch.compile (mode {mode or 'default'}) ---
import torch as _kforge_torch

# One specialised compile per shape set (dynamic shapes would mark the inputs, and generalise the kernels); more
# shape sets than the default recompile limit fail loudly instead of running eagerly unnoticed.
_kforge_config = _kforge_torch._dynamo.config.patch(recompile_limit=256, fail_on_recompile_limit_hit=True)

if isinstance({impl.symbol}, type) and issubclass({impl.symbol}, _kforge_torch.nn.Module):
    class {COMPILED_SYMBOL}({impl.symbol}):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._kforge_compiled = _kforge_config(_kforge_torch.compile(super().forward, mode={mode!r},
                                                                         dynamic=False))

        def forward(self, *args, **kwargs):
            return self._kforge_compiled(*args, **kwargs)
else:
    {COMPILED_SYMBOL} = _kforge_config(_kforge_torch.compile({impl.symbol}, mode={mode!r}, dynamic=False))
"""
    return replace(impl, source=impl.source + wrapper, symbol=COMPILED_SYMBOL,
                   filename=impl.filename.removesuffix(".py") + f"_kforge_{kind.replace('-', '_')}.py")


def compile_settings(settings: EvalSettings) -> EvalSettings:
    """The compiled baseline's evaluation: it calls the framework by design (no fallback rule), and its first call
    compiles, which --timeout bounds rather than the no-progress limit."""
    return replace(settings, allow_framework_fallback=True, stall_floor_s=max(settings.stall_floor_s,
                                                                              settings.timeout_s))


@dataclass
class CompiledBaseline:
    """One compiled baseline, measured against eager: usable only where its verdict is pass."""

    kind: str
    verdict: str
    reason: str
    speedup_over_eager: dict[int, float] = field(default_factory=dict)  # per timed shape set
    ci_over_eager: dict[int, tuple[float, float] | None] = field(default_factory=dict)
    median_ms: dict[int, float] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return self.verdict == "pass" and bool(self.speedup_over_eager)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "mode": COMPILE_MODES.get(self.kind) or "default", "verdict": self.verdict,
                "reason": self.reason, "used": self.usable,
                "per_shape": [{"shape_set": s, "speedup_over_eager": v,
                               "speedup_over_eager_ci": list(self.ci_over_eager.get(s) or []) or None,
                               "median_ms": self.median_ms.get(s)}
                              for s, v in sorted(self.speedup_over_eager.items())]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompiledBaseline:
        found = cls(str(data["kind"]), str(data["verdict"]), str(data.get("reason", "")))
        for entry in data.get("per_shape") or []:
            s = int(entry["shape_set"])
            found.speedup_over_eager[s] = float(entry["speedup_over_eager"])
            ci = entry.get("speedup_over_eager_ci")
            found.ci_over_eager[s] = (float(ci[0]), float(ci[1])) if ci else None
            if entry.get("median_ms") is not None:
                found.median_ms[s] = float(entry["median_ms"])
        return found

    @classmethod
    def from_result(cls, kind: str, result: EvalResult) -> CompiledBaseline:
        found = cls(kind, result.verdict, result.reason)
        if result.verdict != "pass":
            found.reason = f"dropped: the {kind} baseline is {result.verdict}: {result.reason}"
            return found
        for entry in result.details.get("timing") or []:
            s = int(entry["shape_set"])
            found.speedup_over_eager[s] = float(entry["speedup"])
            ci = entry.get("speedup_ci")
            found.ci_over_eager[s] = (float(ci[0]), float(ci[1])) if ci else None
            found.median_ms[s] = float(entry["candidate"]["median_ms"])
        if not found.speedup_over_eager:
            found.reason = f"dropped: the {kind} baseline was not timed ({result.reason})"
        return found


def requested_compiled(kinds: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(k for k in kinds if k in COMPILE_MODES)


def measure_compiled(spec: KernelSpec, eager: Implementation, kinds: tuple[str, ...] | list[str],
                     run: Callable[..., EvalResult], settings: EvalSettings,
                     **kwargs: Any) -> dict[str, CompiledBaseline]:
    """Each compiled kind of `eager` evaluated as a candidate against `eager` (`run`: the caller's
    EvaluationSession.evaluate, with its target, seeds and reference outputs)."""
    found: dict[str, CompiledBaseline] = {}
    for kind in requested_compiled(kinds):
        result = run(spec, compiled_implementation(eager, kind), compile_settings(settings), baseline=eager,
                     **kwargs)
        found[kind] = CompiledBaseline.from_result(kind, result)
    return found


def against_baselines(result: EvalResult, compiled: dict[str, CompiledBaseline]) -> dict[str, Any]:
    """The candidate's speedup against eager, against each usable compiled baseline and against the faster of them
    all (the KForge paper's metric), per timed shape set and as the geometric mean over shape sets."""
    per_shape = {int(t["shape_set"]): (float(t["speedup"]), _ci(t.get("speedup_ci")))
                 for t in result.details.get("timing") or [] if t.get("speedup")}
    out: dict[str, Any] = {"eager": _figure({s: v for s, v in per_shape.items()})}
    usable = {k: c for k, c in compiled.items() if c.usable}
    for kind, base in compiled.items():
        entry: dict[str, Any] = base.to_dict()
        if base.usable:
            shared = {s: per_shape[s] for s in per_shape if s in base.speedup_over_eager}
            entry["against"] = _figure({s: _divide(v, (base.speedup_over_eager[s], base.ci_over_eager[s]))
                                        for s, v in shared.items()})
        out[kind] = entry
    # The faster of eager and every usable compiled baseline, per shape set: its speedup over eager is at least 1.
    best: dict[int, tuple[float, tuple[float, float] | None]] = {}
    faster_of: dict[int, str] = {}
    for s, value in per_shape.items():
        fastest, over = EAGER, (1.0, (1.0, 1.0))
        for kind, base in usable.items():
            if s in base.speedup_over_eager and base.speedup_over_eager[s] > over[0]:
                fastest, over = kind, (base.speedup_over_eager[s], base.ci_over_eager.get(s))
        best[s] = value if fastest == EAGER else _divide(value, over)
        faster_of[s] = fastest
    out["best"] = {**_figure(best), "faster_of": {str(s): k for s, k in sorted(faster_of.items())},
                   "baselines": [EAGER, *usable]}
    out["note"] = ("against eager: this run's paired timing; against a compiled baseline: this run's speedup over "
                   "eager divided by the compiled baseline's (another run), its interval combining both runs'; best: "
                   "against the faster of eager and every compiled baseline that passed, per shape set (the KForge "
                   "paper's metric); headline figures are geometric means over the timed shape sets")
    return out


def _ci(value: Any) -> tuple[float, float] | None:
    return (float(value[0]), float(value[1])) if value else None


def _divide(a: tuple[float, tuple[float, float] | None],
            b: tuple[float, tuple[float, float] | None]) -> tuple[float, tuple[float, float] | None]:
    (va, ca), (vb, cb) = a, b
    ci = (ca[0] / cb[1], ca[1] / cb[0]) if ca and cb and cb[0] > 0 else None
    return va / vb, ci


def _figure(values: dict[int, tuple[float, tuple[float, float] | None]]) -> dict[str, Any]:
    """Per shape set, and the geometric mean (its interval: the geometric means of the bounds, None if any is)."""
    if not values:
        return {"speedup": None, "speedup_ci": None, "per_shape": []}
    speedup = math.exp(sum(math.log(v) for v, _ in values.values()) / len(values))
    cis = [ci for _, ci in values.values()]
    ci = None if any(c is None for c in cis) else [
        math.exp(sum(math.log(c[i]) for c in cis if c) / len(cis)) for i in (0, 1)]
    return {"speedup": speedup, "speedup_ci": ci,
            "per_shape": [{"shape_set": s, "speedup": v, "speedup_ci": list(c) if c else None}
                          for s, (v, c) in sorted(values.items())]}


def beats_every_baseline(result: EvalResult) -> tuple[bool, str]:
    """(whether the candidate is faster with confidence than the faster of the baselines it was compared with, which
    baseline that is): the loop's acceptance where a policy asks for compiled baselines (details.baselines)."""
    baselines = result.details.get("baselines") or {}
    best = baselines.get("best")
    if not best or best.get("speedup") is None:
        return result.faster, EAGER
    against = " and ".join(best.get("baselines") or [EAGER])
    ci = best.get("speedup_ci")
    faster = result.faster and (ci[0] > 1.0 if ci else False)
    return faster, f"the faster of {against}" if len(best.get("baselines") or []) > 1 else EAGER
