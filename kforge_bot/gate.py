"""The regression gate: base against head for every managed kernel a change touches.

For each kernel the change touches (its file, its reference or inputs, a local file any of them
imports, or its manifest entry; `all_kernels` for every kernel), the base and the head version are
measured interleaved in one job on this device (`evaluate(head_spec, head, baseline=base)`; speedup =
base time / head time, so a slower head has a speedup below 1) and judged against the reference:

- correctness oracle: the head's reference (the manifest's `reference`, or a KernelBench file's
  `Model` when the kernel is its `ModelNew`); a kernel that is its own reference is checked against
  its base version instead, so a change cannot make a kernel wrong and vouch for itself;
- `incorrect`: the head's outputs do not match the oracle (or the harness rejected them);
- `error`: the head does not load, build or run (a base that fails alone does not fail the head);
- `regression`: slower than the policy's threshold t with the policy's confidence c: the whole
  c-level interval of the speedup lies below 1/(1+t), i.e. head time / base time > 1 + t with
  one-sided confidence at least (1+c)/2. An interval that straddles 1/(1+t) gets ONE confirmation
  run with three times the time budget, and the confirmation alone decides (a second straddle is
  `pass`, reported as unresolved). Since each run calls a regression with probability at most
  (1-c)/2 when the true slowdown is within t, a false alarm happens with probability at most 1-c;
- `improved`: the whole interval lies above 1+t; `pass`: anything else;
- a run too short for any interval (too few pairs in the budget) is confirmed the same way; if the
  confirmation has none either, the kernel is an `error` (it could not be judged, so it does not pass);
- `skipped`: the policy skips the kernel, or this machine has none of its targets;
- a kernel new in head has no base: it is checked against its reference only (correctness).

The threshold t is the policy's for the target kind the kernel is measured on (by default 2% on
cuda/xpu/mps, 5% on cpu; `Policy.rule_for(name, path, kind)`); the report shows it per kernel.

Required targets (the policy's `required_targets`): each applies to the kernels that run on it (its
kind, or a runner class's kind, is among the kernel's targets). For each changed kernel the report
says, per applicable required target, `measured` or `skipped (needs <target>)` (this run measured
the kernel elsewhere, or not at all: a CPU-only runner and a required cuda). The exit code rule:
0 when no kernel is regression / incorrect / error, else 1; and, only with `require_all_targets`
(the policy's `gate.require_all_targets` or `--require-all-targets`), also 1 when any required
target was not measured. Without it an unmeasured required target is reported and does not fail
the run: the job on a runner that has the device measures it.

Everything here that decides is a pure function of plain data (`timing_decision`,
`harness_verdict`, `exit_code`); `compare` runs the measurements of one kernel, `run_gate` the
whole gate, and the renderers turn a report into a table, Markdown, annotations and a status.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kforge_bot import HARNESS_VERSION, __version__, gitops
from kforge_bot.cache import (
    DEFAULT_DIR,
    ENV_CACHE_DIR,
    ResultCache,
    TargetFingerprint,
    cache_key,
    file_digests,
    local_closure,
    portable,
    probe_fingerprint,
)
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.result import EvalResult, EvalSettings
from kforge_bot.kernels import Kernel, discover
from kforge_bot.policy import GateRule, Policy
from kforge_bot.spec import (
    TARGET_KINDS,
    Implementation,
    KernelSpec,
    has_own_reference,
    kernel_implementation,
)

VERDICTS = ("pass", "improved", "regression", "incorrect", "error", "skipped")
FAILING = ("regression", "incorrect", "error")
# Decisions that depend only on content and settings: safe to reuse. Errors are not cached, since
# a timeout or a missing package can come from the machine rather than the code.
CACHEABLE = ("pass", "improved", "regression", "incorrect")
CONFIRM_FACTOR = 3.0

Evaluator = Callable[..., EvalResult]
Log = Callable[[str], None]


# ------------------------------------------------------------------------------------ the decision


def regression_bound(threshold: float) -> float:
    """Speedup below which the head is slower than the base by more than `threshold`."""
    return 1.0 / (1.0 + threshold)


def timing_decision(speedup_ci: Sequence[float] | None, threshold: float) -> str:
    """'regression' | 'uncertain' (straddles the bound: confirm) | 'improved' | 'pass', or
    'unmeasured' when the run produced no interval (too few pairs in the budget: confirm too)."""
    if not speedup_ci:
        return "unmeasured"
    low, high = float(speedup_ci[0]), float(speedup_ci[1])
    bound = regression_bound(threshold)
    if high < bound:
        return "regression"
    if low < bound:
        return "uncertain"
    if low > 1.0 + threshold:
        return "improved"
    return "pass"


def harness_verdict(result: EvalResult) -> tuple[str, str] | None:
    """The gate's verdict for a harness result that is not a clean pass, else None."""
    if result.verdict == "pass":
        return None
    if result.verdict == "incorrect":
        return "incorrect", result.reason
    if result.verdict == "rejected":
        if result.reason.startswith("static check"):
            return "error", f"the harness refused to run it: {result.reason}"
        return "incorrect", f"rejected by the harness: {result.reason}"
    if result.verdict == "compile_error":
        return "error", f"does not load or build: {result.reason}"
    if result.verdict == "timeout":
        return "error", result.reason
    return "error", f"crashed: {result.reason}"


def exit_code(verdicts: Sequence[str], unmeasured_required: int = 0, require_all_targets: bool = False) -> int:
    """1 if a kernel failed, or (only with `require_all_targets`) a required target went unmeasured."""
    if any(v in FAILING for v in verdicts):
        return 1
    return 1 if require_all_targets and unmeasured_required > 0 else 0


def fmt_threshold(threshold: float | None, target: str = "") -> str:
    """'5% (cpu)', '2.5% (cuda)'."""
    if threshold is None:
        return "-"
    return f"{threshold * 100:.4g}%" + (f" ({target})" if target else "")


def fmt_change(speedup: float | None, ci: Sequence[float] | None) -> str:
    """Head time relative to base: '+3.1% (+2.8% to +3.4%)', '19.8x slower (19.1x-20.6x)'."""
    if speedup is None or speedup <= 0:
        return "n/a"
    ratio = 1.0 / speedup
    lo_r, hi_r = (1.0 / ci[1], 1.0 / ci[0]) if ci and ci[0] > 0 and ci[1] > 0 else (None, None)
    if ratio >= 2.0:
        interval = f" ({lo_r:.1f}x-{hi_r:.1f}x)" if lo_r is not None else ""
        return f"{ratio:.1f}x slower{interval}"

    def pct(r: float) -> str:
        return f"{(r - 1.0) * 100:+.1f}%"

    interval = f" ({pct(lo_r)} to {pct(hi_r)})" if lo_r is not None and hi_r is not None else ""
    return f"{pct(ratio)}{interval}"


# --------------------------------------------------------------------------- kernels at a revision


def dependencies(kernel: Kernel, checkout: Path) -> list[Path]:
    """The kernel's, reference's and inputs' files and every local file they import."""
    checkout = checkout.resolve()
    roots = [Path(kernel.spec.root)] if kernel.spec is not None else [checkout]
    return local_closure([checkout / s for s in kernel.sources], roots, checkout)


def material(kernel: Kernel, checkout: Path) -> dict[str, Any]:
    """What the kernel's result depends on at this revision, free of checkout locations."""
    data: dict[str, Any] = {"files": file_digests(dependencies(kernel, checkout), checkout)}
    if kernel.spec is not None:
        spec = kernel.spec.to_dict()
        spec.pop("name", None)
        data["spec"] = portable(spec)
        data["timed"] = portable(kernel_implementation(kernel.spec).to_dict())
    else:
        data["error"] = kernel.error
    return data


# ---------------------------------------------------------------------------------- one kernel


@dataclass
class Measurement:
    verdict: str
    reason: str
    result: EvalResult | None = None  # the run that decided
    first: EvalResult | None = None  # the first run, when a confirmation decided
    wall_s: float = 0.0
    runs: int = 0
    cacheable: bool = True  # False when the verdict rests on a failure that may be the machine's


def gate_settings(policy: Policy, rule: GateRule, time_budget_s: float | None = None) -> EvalSettings:
    """How hard the gate looks: the policy's evaluation budget, the rule's confidence, and a precision
    goal a quarter of the threshold (so the interval can clear the bound when it is not close)."""
    return EvalSettings(
        isolation=policy.isolation_mode("gate"),
        seeds=policy.evaluation.seeds,
        time_budget_s=time_budget_s if time_budget_s is not None else policy.evaluation.time_budget_s,
        timeout_s=policy.evaluation.timeout_s,
        confidence=rule.confidence,
        target_precision=min(0.005, max(rule.threshold / 4.0, 0.001)),
        # The gate compares a repository's own kernels; calling framework ops is their business.
        allow_framework_fallback=True,
        profile=False,
    )


def confirmation_settings(settings: EvalSettings) -> EvalSettings:
    return replace(settings, time_budget_s=settings.time_budget_s * CONFIRM_FACTOR,
                   max_pairs=int(settings.max_pairs * CONFIRM_FACTOR),
                   target_precision=settings.target_precision / 2.0,
                   timeout_s=settings.timeout_s + settings.time_budget_s * CONFIRM_FACTOR)


def _default_evaluator() -> Evaluator:
    from kforge_bot.evaluate.api import evaluate

    return evaluate


def compare(spec: KernelSpec, head: Implementation, base: Implementation | None, target: str,
            settings: EvalSettings, threshold: float, *, oracle: Implementation | None = None,
            evaluator: Evaluator | None = None, references: Any = None,
            seeds: list[int] | None = None) -> Measurement:
    """Measure and judge one kernel: head against base (or, with no base, against its reference).

    `oracle` replaces the spec's reference (the base version, for a kernel that is its own reference).
    The seeds of the first run are reused by a confirmation run, so the reference is computed once;
    `seeds` and `references` let a caller share one reference computation across many decisions
    (the benchmark's repeated decisions on one kernel)."""
    evaluate = evaluator or _default_evaluator()
    started = time.monotonic()
    seeds_count = max(settings.seeds or spec.seeds, 1)
    from kforge_bot.evaluate.api import ReferenceStore, new_seeds

    store = references if references is not None else ReferenceStore()
    seeds = list(seeds) if seeds else new_seeds(seeds_count)
    judged = replace(spec, reference=oracle) if oracle is not None else spec
    runs = 0

    def run(s: KernelSpec, cand: Implementation, against: Implementation, how: EvalSettings) -> EvalResult:
        nonlocal runs
        runs += 1
        return evaluate(s, cand, target, how, baseline=against, seeds=seeds, references=store)

    def done(m: Measurement) -> Measurement:
        m.wall_s, m.runs = time.monotonic() - started, runs
        return m

    try:
        if base is None:
            result = _safe(lambda: run(spec, head, spec.reference, replace(settings, measure=False)))
            if isinstance(result, str):
                return done(Measurement("error", result))
            bad = harness_verdict(result)
            if bad:
                return done(Measurement(*bad, result=result))
            what = "its reference" if has_own_reference(spec) else "itself (it names no reference)"
            return done(Measurement("pass", f"new kernel: correct against {what}; no base version to time against",
                                    result=result))

        result = _safe(lambda: run(judged, head, base, settings))
        if isinstance(result, str) and oracle is None:
            return done(Measurement("error", f"the head's reference or inputs fail: {result}"))
        if isinstance(result, str) or result.verdict in ("crash", "timeout"):
            # Whose failure? Run the head alone (its own reference, timed against itself): if that
            # passes, the base is what failed, and the head is not to blame.
            why = result if isinstance(result, str) else result.reason
            alone = _safe(lambda: run(spec, head, head, replace(settings, time_budget_s=min(settings.time_budget_s, 1.0))))
            if isinstance(alone, str):
                return done(Measurement("error", alone))
            bad = harness_verdict(alone)
            if bad:
                return done(Measurement(*bad, result=alone))
            return done(Measurement("pass", f"the base version failed ({why}); the head alone is correct against "
                                            "its reference; speed not compared", result=alone, cacheable=False))
        bad = harness_verdict(result)
        if bad:
            return done(Measurement(*bad, result=result))
        decision = timing_decision(result.speedup_ci, threshold)
        if decision not in ("uncertain", "unmeasured"):
            return done(Measurement(decision, _timing_reason(decision, result, threshold), result=result))

        confirm = _safe(lambda: run(judged, head, base, confirmation_settings(settings)))
        if isinstance(confirm, str):
            return done(Measurement("error", f"confirmation run: {confirm}", result=result))
        bad = harness_verdict(confirm)
        if bad:
            return done(Measurement(bad[0], f"confirmation run: {bad[1]}", result=confirm, first=result))
        decision = timing_decision(confirm.speedup_ci, threshold)
        if decision == "unmeasured":
            # Passing what could not be timed would let any slowdown through; failing says what to fix.
            note = confirm.details.get("speedup_ci_note") or "no timing came back"
            return done(Measurement("error", f"could not be timed, even with a confirmation run of "
                                             f"{confirmation_settings(settings).time_budget_s:g} s ({note}); raise the "
                                             "policy's evaluation.time_budget_s", result=confirm, first=result,
                                    cacheable=False))
        final = "pass" if decision == "uncertain" else decision
        reason = _timing_reason(final, confirm, threshold)
        if decision == "uncertain":
            reason = (f"not resolved at the {threshold:.1%} threshold after a confirmation run "
                      f"({fmt_change(confirm.speedup, confirm.speedup_ci)}); not counted as a regression")
        return done(Measurement(final, f"confirmed: {reason}", result=confirm, first=result))
    finally:
        if references is None:
            store.cleanup()


def _safe(call: Callable[[], EvalResult]) -> EvalResult | str:
    """An evaluation, or the one-line reason it could not run (a reference or inputs that fail)."""
    try:
        return call()
    except KforgeError as exc:
        return str(exc)


def _timing_reason(decision: str, result: EvalResult, threshold: float) -> str:
    change = fmt_change(result.speedup, result.speedup_ci)
    confidence = result.details.get("confidence", 0.95)
    if decision == "regression":
        return f"slower than the base by more than {threshold:.1%} ({change}, {confidence:.0%} interval)"
    if decision == "improved":
        return f"faster than the base by more than {threshold:.1%} ({change})"
    return f"within the {threshold:.1%} threshold ({change})"


# ---------------------------------------------------------------------------------- the report


@dataclass
class KernelReport:
    id: str
    name: str
    file: str
    format: str
    verdict: str
    reason: str
    target: str = ""
    device_name: str = ""
    base_ms: float | None = None
    head_ms: float | None = None
    speedup: float | None = None
    speedup_ci: list[float] | None = None
    threshold: float | None = None
    confidence: float | None = None
    threshold_from: str = ""  # the policy key the threshold came from (gate.threshold.cpu, gate.rules[0]...)
    rule: str = ""
    # per required target that applies to this kernel: "measured", or "skipped (needs cuda)"
    required: dict[str, str] = field(default_factory=dict)
    new: bool = False
    cached: bool = False
    measured: bool = False
    confirmed: bool = False
    first_run: dict[str, Any] | None = None
    touched_by: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    key: str | None = None
    evaluation: dict[str, Any] | None = None

    @property
    def change(self) -> str:
        return fmt_change(self.speedup, self.speedup_ci)

    @property
    def unmeasured_required(self) -> list[str]:
        return [t for t, status in self.required.items() if status != "measured"]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["change"] = self.change
        data["threshold_text"] = fmt_threshold(self.threshold, self.target)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelReport:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class GateReport:
    repo: str
    base_ref: str
    head_ref: str
    base_sha: str
    head_sha: str
    merge_base: str
    kernels: list[KernelReport]
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    targets: dict[str, dict[str, str]] = field(default_factory=dict)
    policy: str = ""
    all_kernels: bool = False
    cache_dir: str | None = None
    wall_s: float = 0.0
    required_targets: list[str] = field(default_factory=list)  # the policy's, as written
    require_all_targets: bool = False

    def unmeasured_required(self) -> dict[str, list[str]]:
        """Required target -> the ids of the kernels this run could not measure on it."""
        out: dict[str, list[str]] = {}
        for k in self.kernels:
            for t in k.unmeasured_required:
                out.setdefault(t, []).append(k.id)
        return out

    @property
    def exit_code(self) -> int:
        missing = sum(len(v) for v in self.unmeasured_required().values())
        return exit_code([k.verdict for k in self.kernels], missing, self.require_all_targets)

    def counts(self) -> dict[str, int]:
        out = {v: 0 for v in VERDICTS}
        for k in self.kernels:
            out[k.verdict] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kforge_bot": __version__,
            "harness_version": HARNESS_VERSION,
            "repo": self.repo,
            "base": {"ref": self.base_ref, "sha": self.base_sha, "merge_base": self.merge_base},
            "head": {"ref": self.head_ref, "sha": self.head_sha},
            "all_kernels": self.all_kernels,
            "policy": self.policy,
            "targets": self.targets,
            "cache_dir": self.cache_dir,
            "counts": self.counts(),
            "exit_code": self.exit_code,
            "required_targets": {
                "targets": self.required_targets,
                "require_all_targets": self.require_all_targets,
                "unmeasured": self.unmeasured_required(),
                "fails": self.require_all_targets and bool(self.unmeasured_required()),
            },
            "kernels": [k.to_dict() for k in self.kernels],
            "unchanged": self.unchanged,
            "removed": self.removed,
            "notes": self.notes,
            "wall_s": round(self.wall_s, 3),
        }


def _trim(result: EvalResult) -> dict[str, Any]:
    data = result.to_dict()
    data.get("correctness", {}).pop("records", None)
    details = data.get("details", {})
    if "log_tail" in details:
        details["log_tail"] = details["log_tail"][-2000:]
    if "traceback" in details:
        details["traceback"] = details["traceback"][-2000:]
    data.pop("profile", None)
    return data


def _report_from(kernel: Kernel, m: Measurement, rule: GateRule, target: str, touched: list[str],
                 new: bool) -> KernelReport:
    r = m.result
    report = KernelReport(id=kernel.id, name=kernel.name, file=kernel.file, format=kernel.format, verdict=m.verdict,
                          reason=m.reason, target=target, threshold=rule.threshold, confidence=rule.confidence,
                          threshold_from=rule.threshold_from, rule=rule.matched, new=new, measured=True,
                          confirmed=m.first is not None, touched_by=touched, wall_s=round(m.wall_s, 3))
    if r is not None:
        report.device_name = r.device_name
        report.base_ms = r.baseline.median_ms if r.baseline and not new else None
        report.head_ms = r.candidate.median_ms if r.candidate and not new else None
        report.speedup = r.speedup if not new else None
        report.speedup_ci = list(r.speedup_ci) if r.speedup_ci and not new else None
        report.evaluation = _trim(r)
    if m.first is not None:
        report.first_run = {"speedup": m.first.speedup,
                            "speedup_ci": list(m.first.speedup_ci) if m.first.speedup_ci else None,
                            "change": fmt_change(m.first.speedup, m.first.speedup_ci),
                            "pairs": [t.get("pairs") for t in m.first.details.get("timing", [])]}
    return report


# ---------------------------------------------------------------------------------- targets


def _available(kind: str) -> bool:
    if kind == "cpu":
        return True  # without importing torch: a fully cached gate never needs it
    from kforge_bot.targets import target_class

    return bool(target_class(kind).available())


@dataclass(frozen=True)
class TargetChoice:
    """What `--target` asked for: auto, a device kind, or a hardware runner class (h200, b200, ...)."""

    requested: str
    kind: str | None  # None for auto
    runner: str | None = None


def parse_target(value: str) -> TargetChoice:
    value = (value or "auto").strip()
    if value == "auto":
        return TargetChoice("auto", None)
    if value in TARGET_KINDS:
        if not _available(value):
            raise KforgeError(f"target {value!r} is not available on this machine",
                              hint="run `kforge-bot doctor` to see what is, or use --target auto")
        return TargetChoice(value, value)
    from kforge_bot.hardware import all_runners

    runners = all_runners()
    if value not in runners:
        raise KforgeError(f"unknown target {value!r}",
                          hint=f"use auto, a device kind ({', '.join(TARGET_KINDS)}) or a runner class "
                               f"({', '.join(sorted(runners))})")
    kind = runners[value].target
    if not _available(kind):
        raise KforgeError(f"target {value!r} needs a {kind} device, and this machine has none",
                          hint="run the gate on a runner of that class, or use --target auto")
    return TargetChoice(value, kind, value)


def kernel_target(choice: TargetChoice, spec: KernelSpec) -> tuple[str | None, str]:
    """(device kind to measure on, or None with the reason it is skipped)."""
    if choice.kind is not None:
        if choice.kind not in spec.targets:
            return None, f"the kernel does not run on {choice.kind} (its targets: {', '.join(spec.targets)})"
        return choice.kind, ""
    for kind in ("cuda", "xpu", "mps", "cpu"):
        if kind in spec.targets and _available(kind):
            return kind, ""
    return None, f"none of the kernel's targets ({', '.join(spec.targets)}) is on this machine"


# ---------------------------------------------------------------------------------- required targets


@dataclass(frozen=True)
class RequiredTarget:
    """One entry of the policy's `required_targets`: a device kind, or a runner class (h200, ...)."""

    name: str
    kind: str
    runner: str | None = None
    title: str = ""

    @property
    def needs(self) -> str:
        return self.kind if self.runner is None else f"{self.name}: {self.title.split(' (')[0]}"


def required_targets(policy: Policy) -> list[RequiredTarget]:
    """The policy's required targets, resolved; an unknown name is a configuration error."""
    out: list[RequiredTarget] = []
    runners = None
    for name in policy.required_targets:
        if name in TARGET_KINDS:
            out.append(RequiredTarget(name, name))
            continue
        if runners is None:
            from kforge_bot.hardware import all_runners

            runners = all_runners()
        if name not in runners:
            raise KforgeError(f"required_targets: unknown target {name!r}", path=policy.source,
                              hint=f"use a device kind ({', '.join(TARGET_KINDS)}) or a runner class "
                                   f"({', '.join(sorted(runners))})")
        runner = runners[name]
        out.append(RequiredTarget(name, runner.target, name, runner.title))
    return out


def required_status(required: Sequence[RequiredTarget], spec: KernelSpec, measured_kind: str | None,
                    device_name: str, choice: TargetChoice) -> dict[str, str]:
    """Per required target that applies to the kernel (it runs there): "measured" when this run
    measured it on that target, else "skipped (needs ...)". Pure apart from runner-class matching."""
    out: dict[str, str] = {}
    for r in required:
        if r.kind not in spec.targets:
            continue  # the kernel does not run there: nothing to require
        measured = measured_kind == r.kind
        if measured and r.runner is not None and choice.runner != r.runner:
            from kforge_bot.hardware import get_runner

            measured = get_runner(r.runner).matches(device_name)
        out[r.name] = "measured" if measured else f"skipped (needs {r.needs})"
    return out


# ---------------------------------------------------------------------------------- the whole gate


def repo_root(path: str | Path) -> Path:
    top = gitops.toplevel(path)
    if top is None:
        raise KforgeError("not inside a git repository", path=path,
                          hint="run the gate in a clone (actions/checkout with fetch-depth: 0)")
    return top


def run_gate(repo: str | Path, base: str, head: str = "HEAD", *, policy: Policy, all_kernels: bool = False,
             target: str = "auto", cache_dir: str | Path | None = None, use_cache: bool = True,
             time_budget_s: float | None = None, fingerprints: Mapping[str, TargetFingerprint] | None = None,
             log: Log | None = None, evaluator: Evaluator | None = None, measure: bool = True,
             before_first_run: Callable[[], None] | None = None,
             require_all_targets: bool | None = None) -> GateReport:
    """Run the gate. `fingerprints` pins the target fingerprint per kind (otherwise probed);
    `measure=False` plans only: it reports cache hits and what would be measured, measuring nothing.
    `require_all_targets` (default: the policy's) makes an unmeasured required target fail the run."""

    started = time.monotonic()
    say = log or (lambda _msg: None)
    choice = parse_target(target)
    required = required_targets(policy)
    strict_targets = policy.gate.require_all_targets if require_all_targets is None else require_all_targets
    root = repo_root(repo)
    head_sha = gitops.resolve(root, head)
    base_sha = gitops.resolve(root, base)
    merge_base = gitops.merge_base(root, base_sha, head_sha)
    changed: set[str] = set()
    for c in gitops.changed_files(root, merge_base, head_sha):
        changed.add(c.path)
        if c.old_path:
            changed.add(c.old_path)
    # One setting for every command's cache: --cache-dir, then $KFORGE_CACHE_DIR (as optimize reads it), then the
    # repository's .kforge-cache, which actions/cache can carry between runs.
    chosen = cache_dir or os.environ.get(ENV_CACHE_DIR)
    cache = ResultCache(Path(chosen) if chosen else root / DEFAULT_DIR) if use_cache else None
    report = GateReport(repo=str(root), base_ref=base, head_ref=head, base_sha=base_sha, head_sha=head_sha,
                        merge_base=merge_base, kernels=[], policy=policy.source, all_kernels=all_kernels,
                        cache_dir=str(cache.directory) if cache else None,
                        required_targets=list(policy.required_targets), require_all_targets=strict_targets)
    known: dict[str, TargetFingerprint] = dict(fingerprints or {})

    def fingerprint(kind: str) -> TargetFingerprint:
        if kind not in known:
            known[kind] = probe_fingerprint(kind)
            fp = known[kind]
            if choice.runner is not None and kind == choice.kind:
                from kforge_bot.hardware import get_runner

                runner = get_runner(choice.runner)
                if not runner.is_catch_all and not runner.matches(fp.device_name):
                    raise KforgeError(f"--target {choice.runner}: this machine's {kind} device is "
                                      f"{fp.device_name!r}, not a {runner.title}",
                                      hint="run on a runner of that class, or pass the device kind instead")
        return known[kind]

    with contextlib.ExitStack() as stack:
        say(f"checking out {merge_base[:12]} (base) and {head_sha[:12]} (head)")
        base_root = stack.enter_context(gitops.worktree(root, merge_base)).resolve()
        head_root = stack.enter_context(gitops.worktree(root, head_sha)).resolve()
        head_kernels = discover(head_root, policy, strict=True, notes=report.notes)
        base_notes: list[str] = []
        base_kernels = discover(base_root, policy, strict=False, notes=base_notes)
        report.notes.extend(f"base: {n}" for n in base_notes)

        def clean(entry: KernelReport) -> KernelReport:
            # Reasons name files inside the temporary checkouts: show them as repository paths.
            for checkout in (head_root, base_root):
                entry.reason = entry.reason.replace(f"{checkout}{os.sep}", "")
            return entry

        for kid in sorted(set(base_kernels) - set(head_kernels)):
            gone = base_kernels[kid]
            if gone.format == "kernelbench" and (head_root / gone.file).is_file():
                head_kernels[kid] = Kernel(kid, gone.name, gone.format, gone.file, None,
                                           "no longer a KernelBench problem (class Model, get_inputs, "
                                           "get_init_inputs) or it does not parse", gone.sources)
            else:
                report.removed.append(kid)

        for kid in sorted(head_kernels):
            kernel = head_kernels[kid]
            old = base_kernels.get(kid)
            head_deps = dependencies(kernel, head_root)
            base_deps = dependencies(old, base_root) if old is not None else []
            head_mat = material(kernel, head_root)
            base_mat = material(old, base_root) if old is not None else None
            touched = sorted(changed & {p.relative_to(head_root).as_posix() for p in head_deps}
                             | changed & {p.relative_to(base_root).as_posix() for p in base_deps})
            if not all_kernels and base_mat == head_mat:
                report.unchanged.append(kid)
                continue
            if kernel.spec is None:
                report.kernels.append(clean(KernelReport(kid, kernel.name, kernel.file, kernel.format, "error",
                                                         f"does not load: {kernel.error}", touched_by=touched,
                                                         new=old is None)))
                continue
            rule = policy.rule_for(kernel.name, kernel.file)  # skip does not depend on the target
            if rule.skip:
                report.kernels.append(KernelReport(kid, kernel.name, kernel.file, kernel.format, "skipped",
                                                   f"skipped by the policy ({rule.matched}"
                                                   + (f": {rule.reason})" if rule.reason else ")"),
                                                   rule=rule.matched, touched_by=touched))
                continue
            kind, why = kernel_target(choice, kernel.spec)
            if kind is None:
                needs = required_status(required, kernel.spec, None, "", choice)
                report.kernels.append(KernelReport(kid, kernel.name, kernel.file, kernel.format, "skipped", why,
                                                   touched_by=touched, required=needs))
                continue
            fp = fingerprint(kind)
            report.targets[kind] = fp.to_dict()
            rule = policy.rule_for(kernel.name, kernel.file, kind)  # the threshold for this target kind
            needs = required_status(required, kernel.spec, kind, fp.device_name, choice)
            settings = gate_settings(policy, rule, time_budget_s)
            usable_base = old if old is not None and old.spec is not None else None
            key_material = {"kernel": kid, "head": head_mat, "base": base_mat if usable_base else None,
                            "rule": {"threshold": rule.threshold, "confidence": rule.confidence},
                            "settings": settings.key_material(), "target": fp.to_dict()}
            key = cache_key(key_material)
            hit = cache.get(key) if cache is not None else None
            if hit is not None:
                cached = KernelReport.from_dict(hit)
                cached.id, cached.file, cached.cached, cached.measured = kid, kernel.file, True, False
                cached.touched_by, cached.key, cached.wall_s, cached.required = touched, key, 0.0, needs
                report.kernels.append(cached)
                say(f"{kernel.name}: cache hit ({cached.verdict})")
                continue
            if not measure:
                report.kernels.append(KernelReport(kid, kernel.name, kernel.file, kernel.format, "skipped",
                                                   "plan only: not in the cache, would be measured", target=kind, key=key,
                                                   touched_by=touched, new=usable_base is None, threshold=rule.threshold,
                                                   confidence=rule.confidence, threshold_from=rule.threshold_from,
                                                   required=needs))
                continue
            head_impl = kernel_implementation(kernel.spec)
            base_impl = oracle = None
            if usable_base is not None:
                assert old is not None and old.spec is not None
                # Its `root` is the base checkout: the worker imports each implementation with its own
                # repository's local modules, so base and head may both `import helper` and mean two files.
                base_impl = kernel_implementation(old.spec)
                if not has_own_reference(kernel.spec):
                    oracle = base_impl
            if before_first_run is not None:
                before_first_run()  # says whether the code about to run is sandboxed
                before_first_run = None
            say(f"{kernel.name}: measuring {'head against base' if base_impl else 'new kernel against its reference'}"
                f" on {kind} ({fp.device_name}), threshold {fmt_threshold(rule.threshold)}")
            m = compare(kernel.spec, head_impl, base_impl, kind, settings, rule.threshold, oracle=oracle,
                        evaluator=evaluator)
            entry = clean(_report_from(kernel, m, rule, kind, touched, new=old is None))
            if old is not None and usable_base is None:
                entry.reason = f"the base version does not load, so only correctness was checked; {entry.reason}"
            entry.key, entry.required = key, needs
            say(f"{kernel.name}: {entry.verdict} ({entry.reason})")
            report.kernels.append(entry)
            if cache is not None and entry.verdict in CACHEABLE and m.cacheable:
                cache.put(key, key_material, entry.to_dict())
    if cache is not None and cache.rejected:
        note = (f"ignored {len(cache.rejected)} cache entr{'y' if len(cache.rejected) == 1 else 'ies'} that failed "
                f"authentication (not written by this machine's bot) and measured again: "
                + ", ".join(Path(p).name for p in cache.rejected[:3]))
        report.notes.append(note)
        say(note)
    report.wall_s = time.monotonic() - started
    return report
