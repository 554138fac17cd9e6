"""The verdict on one candidate, from its worker's outcome: the bot compares the outputs itself and computes
every statistic from the raw samples (kforge_bot.evaluate.api runs the workers).

torch is imported only to compare (the bot must not import it at start: `--target cuda` runs every kernel in
workers, and the import costs seconds); kforge_bot.evaluate.references starts that import in a thread while
the reference's worker runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kforge_bot import HARNESS_VERSION, __version__
from kforge_bot.evaluate import bound, isolation
from kforge_bot.evaluate.comparison import compare_all
from kforge_bot.evaluate.wire import conditions
from kforge_bot.evaluate.wire.plan import Plan
from kforge_bot.evaluate.wire.result import DIRECTIONS, EvalResult, EvalSettings, TimingStats, directions_text
from kforge_bot.evaluate.wire.shapes import DEFINITION, ShapeSpeedup, combine, regression_text
from kforge_bot.evaluate.sandbox import WorkerOutcome
from kforge_bot.evaluate.wire.stats import speedup_from_pairs, summarize, systematic_floor, widen
from kforge_bot.targets import target_kind


def judge(plan: Plan, outcome: WorkerOutcome, ref_outputs: dict[str, list[Any]],
          ref_result: dict[str, Any]) -> EvalResult:
    """The verdict on the candidate's worker: how it ended, then its outputs against the reference's, its
    profile, and its timing (statistics from the raw samples, checked against the hardware's floor)."""
    base = _new_result(plan, outcome, ref_result)
    if _ended_without_result(base, outcome):
        return base
    message = outcome.result
    _read_message(base, message)
    if outcome.shared is not None and outcome.shared.rejected:
        base.verdict, base.reason = "rejected", f"the candidate's output channel carried {outcome.shared.rejected}"
        return base
    correctness = compare_all(plan, ref_outputs, timed=bool(message.get("timing")), shared=outcome.shared,
                              saved=message.get("saved"), nothing_to_change=bool(ref_result.get("nothing_to_change")))
    base.correctness = correctness
    if not correctness["ok"]:
        base.verdict, base.reason = correctness["status"], correctness["reason"]
        return base

    rejection = _profile_rejection(plan, base.profile)
    if rejection:
        base.verdict, base.reason = "rejected", rejection
        return base

    base.verdict = "pass"
    base.reason = "correct on every case"
    timing = message.get("timing") or []
    if timing:
        _judge_timing(base, plan, timing, ref_outputs, ref_result)
    return base


def _new_result(plan: Plan, outcome: WorkerOutcome, ref_result: dict[str, Any]) -> EvalResult:
    """The result before any verdict (a crash, until the outcome says otherwise), with the run's details."""
    base = EvalResult(verdict="crash", reason="", target=plan.target,
                      device_name=ref_result.get("device_name", ""), target_info=ref_result.get("target_info", {}))
    base.details = {"harness_version": harness_version(), "wall_s": round(outcome.wall_s, 3),
                    "log_tail": outcome.log_tail[-4000:],
                    "isolation": isolation.probe().describe() if outcome.sandboxed else "not sandboxed"}
    if ref_result.get("input_bytes") is not None:
        base.details["input_bytes"] = ref_result["input_bytes"]  # per shape set, tensors only
    if outcome.forged_lines:
        base.details["forged_lines"] = outcome.forged_lines
    return base


def _read_message(base: EvalResult, message: dict[str, Any]) -> None:
    """What the worker's ok result says besides the outputs and timing: the device, the profile, and the state it
    restored or shared."""
    base.device_name = message.get("device_name", base.device_name)
    base.target_info = message.get("target_info", base.target_info)
    profile = message.get("profile", {})
    base.profile = {"baseline": profile.get("baseline", {}), "candidate": profile.get("candidate", {}),
                    "reference": profile.get("reference", {})}
    if profile.get("reference_flops") is not None:
        base.profile["reference_flops"] = profile["reference_flops"]  # per shape set; None where not counted
    if message.get("restored_state"):
        base.details["restored_state"] = message["restored_state"]
    if message.get("shared_state"):  # weights both sides read from one place (loading.share_matching_state)
        base.details["shared_with_baseline"] = message["shared_state"]


def _judge_timing(base: EvalResult, plan: Plan, timing: list[dict[str, Any]], ref_outputs: dict[str, list[Any]],
                  ref_result: dict[str, Any]) -> None:
    """A correct candidate's timing: its figures attached and its speedup in the reason; rejected where a median
    beats the hardware's floor, inconclusive where the conditions say the timing was disturbed."""
    _attach_timing(base, timing, plan.settings, plan.spec.shape_sets)
    _attach_directions(base, timing, plan.settings.confidence)
    broken = _physical_bound(base, plan, ref_outputs, ref_result)
    if broken:
        base.verdict, base.reason = "rejected", broken
        base.speedup = base.speedup_ci = None
        base.per_shape = []
        return
    base.reason = _speed_reason(base)
    disturbed = _attach_conditions(base, plan.settings)
    if disturbed:
        base.verdict = "inconclusive"
        base.reason = f"timing disturbed: {disturbed}; not a verdict on its speed ({base.reason})"


def _speed_reason(result: EvalResult) -> str:
    """'correct on every case; 1.234x (CI ...)', with the shape sets that got slower and, for a kernel with a
    backward, each direction's figures."""
    reason = result.reason
    several = " (geometric mean over the shape sets)" if len(result.per_shape) > 1 else ""
    if result.speedup_ci is not None:
        reason = (f"correct on every case; {result.speedup:.3f}x{several} "
                  f"(CI {result.speedup_ci[0]:.3f}-{result.speedup_ci[1]:.3f})")
    elif result.speedup is not None:
        reason = f"correct on every case; {result.speedup:.3f}x{several} ({result.details['speedup_ci_note']})"
    slow = regression_text(result.per_shape)
    if slow:
        reason += f"; but {slow}"
    if result.details.get("directions"):  # a backward: the headline is forward+backward; each direction said
        reason += "; " + directions_text(result.details["directions"])
    return reason


def _attach_conditions(result: EvalResult, settings: EvalSettings) -> str | None:
    """Each shape set's timing conditions (evaluate.wire.conditions) summarised in `details.conditions`, and the one
    line saying what disturbed the timing where the policy's limits say it was (else None)."""
    limits = conditions.policy_limits(settings.max_preempted_share, settings.max_preempted_gap,
                                      settings.max_crowded_share, settings.max_wait_share)
    per_shape = []
    disturbed = None
    for entry in result.details.get("timing") or []:
        sides = entry.get("conditions") or {}
        why = conditions.disturbance(sides, limits)
        per_shape.append({"shape_set": entry["shape_set"], **sides, "disturbed": why})
        if why and disturbed is None:
            disturbed = f"shape set {entry['shape_set']}: {why}" if len(result.per_shape) > 1 else why
    if per_shape:
        result.details["conditions"] = {"per_shape": per_shape, "disturbed": disturbed,
                                        "threads": threads_text(per_shape)}
    return disturbed


def threads_text(per_shape: list[dict[str, Any]]) -> str:
    """'baseline 1.9 threads busy, candidate 1.0 (process 3 threads, 2 cores)': each side's CPU time per wall
    second in its timed samples (medians over the shape sets' medians)."""
    sides = {}
    for name in ("baseline", "candidate"):
        busy = sorted(p[name]["busy_threads"] for p in per_shape if (p.get(name) or {}).get("busy_threads") is not None)
        if busy:
            sides[name] = busy[len(busy) // 2]
    if not sides:
        return ""
    threads = max(int((p.get("candidate") or {}).get("threads", 0)) for p in per_shape)
    cores = next((p["candidate"].get("cores") for p in per_shape if p.get("candidate")), None)
    return (", ".join(f"{name} {value:.1f} threads busy" for name, value in sides.items())
            + f" (process {threads} threads, {cores} cores)")


def harness_version() -> str:
    """What judged a verdict: the package's version and the harness's (kforge_bot.HARNESS_VERSION), which `recheck`
    compares with today's."""
    return f"{__version__}+harness.{HARNESS_VERSION}"


def _ended_without_result(base: EvalResult, outcome: WorkerOutcome) -> bool:
    """Where the worker ended without an ok result (flooded, timed out, exited early, stopped with a verdict):
    the verdict and reason set on `base`, and True. A crash or a timeout also says whose code it was in
    (`details["failed_side"]`: the baseline's while the worker built it or in its own call, else the
    candidate's), so the gate charges it to that side and never to the other."""
    ended = _how_it_ended(base, outcome)
    if ended and base.verdict in ("crash", "timeout"):
        message = outcome.result or {}
        built = any(m.get("phase") == "baseline built" for m in outcome.messages)
        base.details["failed_side"] = "baseline" if message.get("side") == "baseline" or not built else "candidate"
    return ended


def _how_it_ended(base: EvalResult, outcome: WorkerOutcome) -> bool:
    message = outcome.result
    if outcome.flooded or outcome.overfilled is not None:
        base.verdict, base.reason = "rejected", f"the candidate {outcome.exit_description()}"
        return True
    if outcome.timed_out:
        base.verdict, base.reason = "timeout", f"the candidate {outcome.exit_description()}"
        return True
    if message is None:
        if outcome.returncode == 0:
            base.verdict = "rejected"
            base.reason = "the candidate's process exited before the harness finished (early exit)"
            if outcome.forged_lines:
                base.reason += f" after writing {outcome.forged_lines} unsigned line(s) to the result channel"
        else:
            base.reason = f"the candidate's process {outcome.exit_description()}"
        return True
    status = message.get("status")
    if status != "ok":
        base.verdict = status if status in ("compile_error", "crash", "rejected", "incorrect", "timeout") else "crash"
        base.reason = message.get("reason", "")
        base.details["traceback"] = message.get("detail", "")
        return True
    return False


def _physical_bound(result: EvalResult, plan: Plan, ref_outputs: dict[str, list[Any]],
                    ref_result: dict[str, Any]) -> str | None:
    """Records each shape set's hardware floor in the timing details; the first one the candidate's median
    beats is returned as the reason for a rejection. Very large gains are flagged for a human."""
    per_shape = result.details.get("timing") or []
    inputs = ref_result.get("input_bytes") or [None] * len(plan.spec.shape_sets)
    traffic = [None if inputs[s] is None else
               inputs[s] + bound.tensor_bytes(ref_outputs.get(plan.timed_ref_file(s, 0), []))
               for s in range(len(plan.spec.shape_sets))]
    calls = [next((t["calls_per_sample"] for t in per_shape if t["shape_set"] == s), 1)
             for s in range(len(plan.spec.shape_sets))]
    info = result.target_info or {}
    found = bound.floors(target_kind(plan.target), result.device_name, info.get("l2_bytes"), traffic, calls,
                         plan.settings.rotate_sets)
    problem = None
    for floor in found:
        entry = next((t for t in per_shape if t["shape_set"] == floor.shape), None)
        if entry is None:
            continue
        entry["hardware_floor_ms"] = floor.ms
        entry["hardware_floor"] = f"{floor.bytes} B at {floor.bandwidth_gbs:g} GB/s ({floor.source})"
        problem = problem or bound.violation(floor, entry["candidate"]["median_ms"])
        baseline = bound.violation(floor, entry["baseline"]["median_ms"])
        problem = problem or (f"the baseline's timing is impossible, so this comparison is void: {baseline}"
                              if baseline else None)
    if result.speedup is not None and result.speedup > bound.LARGE_GAIN:
        result.details["large_gain"] = (f"{result.speedup:.1f}x is over {bound.LARGE_GAIN:g}x: worth a human look "
                                        "before it is believed (KernelBench flags the same)")
    return problem


def _profile_rejection(plan: Plan, profile: dict[str, Any]) -> str | None:
    # Kernels on a side stream are no verdict by themselves: libraries fork and join streams (cuDNN's grouped
    # transposed convolutions: the reference itself was rejected so), and a candidate can tell a profiled call from
    # a timed one. Work that outlives the timed region shows in every timed sample instead (timing.py, busy after).
    cand = profile.get("candidate") or {}
    if plan.settings.allow_framework_fallback or plan.candidate == plan.baseline:
        return None  # an A/A run (the same code on both sides) measures the harness's noise, not a kernel
    ref_ops = set((profile.get("reference") or {}).get("compute_ops") or [])
    cand_ops = set(cand.get("compute_ops") or [])
    if ref_ops and ref_ops <= cand_ops:
        return (f"the candidate still calls every framework op the reference uses ({', '.join(sorted(ref_ops)[:4])}):"
                " it falls back to the framework instead of replacing it (policy allow_framework_fallback: false)")
    return None


def _attach_timing(result: EvalResult, timing: list[dict[str, Any]], settings: EvalSettings,
                   shapes: Sequence[dict[str, Any]] = ()) -> None:
    """Each shape set's speedup and interval from its own pairs, judged by its rule (evaluate.wire.shapes); the
    headline is their geometric mean, its interval theirs combined. Pooling every set's pairs into one median hid a set 7x
    slower behind another set 6x faster."""
    confidence = settings.confidence
    usable = [t for t in timing if t.get("baseline_ms") and t.get("candidate_ms")]
    if not usable:
        return
    per_shape: list[dict[str, Any]] = []
    floors: list[float] = []
    within: list[tuple[float, float] | None] = []
    for t in usable:
        b, c = t["baseline_ms"], t["candidate_ms"]
        speedup, ci = speedup_from_pairs(b, c, confidence)
        floor = systematic_floor(t.get("calls_per_sample", 1))
        floors.append(floor)
        finite = math.isfinite(ci[0])
        within.append(ci if finite else None)
        per_shape.append({"shape_set": t["shape"], "baseline": summarize(b).to_dict(),
                          "candidate": summarize(c).to_dict(), "speedup": speedup,
                          "speedup_ci": list(widen(ci, floor)) if finite else None,
                          "speedup_ci_within_run": list(ci) if finite else None,
                          "systematic_floor": floor,
                          "pairs": len(b), "calls_per_sample": t.get("calls_per_sample", 1),
                          "stop_reason": t.get("stop_reason", ""), "wall_s": t.get("wall_s"),
                          "mode": t.get("mode", "eager"), "mode_note": t.get("mode_note", ""),
                          "busy_after_ms": t.get("busy_after_ms", {}),
                          "busy_before_ms": t.get("busy_before_ms", {}),
                          "host_tail_ms": t.get("host_tail_ms", {}),  # already off each sample's busy-after
                          "per_call_ms": t.get("per_call_ms", {}),
                          "conditions": t.get("conditions", {})})
    result.per_shape = []
    for entry in per_shape:
        s = entry["shape_set"]
        rule = settings.shape_rule(s)
        ci = entry["speedup_ci"]
        result.per_shape.append(ShapeSpeedup(
            shape_set=s, shape=dict(shapes[s]) if s < len(shapes) else {}, speedup=entry["speedup"],
            ci=(ci[0], ci[1]) if ci else None, baseline_ms=entry["baseline"]["median_ms"],
            candidate_ms=entry["candidate"]["median_ms"], pairs=entry["pairs"], threshold=rule.threshold,
            informational=rule.informational))
    # The sets' within-run intervals combine (independent pairs); the systematic floor is an error the sets share
    # (the process, the clocks), so it widens the combined interval once rather than being averaged away.
    result.speedup, within_ci = combine([p.speedup for p in result.per_shape], within)
    result.speedup_ci = widen(within_ci, max(floors)) if within_ci else None
    result.details["speedup_ci_within_run"] = list(within_ci) if within_ci else None
    result.details["systematic_floor"] = max(floors)
    result.details["speedup_definition"] = DEFINITION
    if result.speedup_ci is None:
        # The range of a handful of pairs is no 95% interval: report none rather than an overconfident one.
        few = min(p.pairs for p in result.per_shape)
        result.details["speedup_ci_note"] = (f"too few pairs ({few}) for a {confidence:.1%} confidence "
                                             "interval; give it more time")
    b_stats = [summarize(t["baseline_ms"]) for t in usable]
    c_stats = [summarize(t["candidate_ms"]) for t in usable]
    result.baseline = _sum_stats(b_stats)
    result.candidate = _sum_stats(c_stats)
    result.details["timing"] = per_shape
    result.details["confidence"] = confidence


def _attach_directions(result: EvalResult, timing: list[dict[str, Any]], confidence: float) -> None:
    """A kernel with a backward: each direction's figures in `details.directions` (forward alone, backward alone,
    and forward+backward, the measurement every output check and the headline come from), its shape sets combined
    as the headline's are (evaluate.wire.shapes.combine)."""
    with_directions = [t for t in timing if t.get("directions")]
    if not with_directions:
        return
    figures: dict[str, Any] = {}
    for name in DIRECTIONS:
        rows = [t if name == "forward+backward" else t["directions"].get(name) or {} for t in with_directions]
        rows = [r for r in rows if r.get("baseline_ms") and r.get("candidate_ms")]
        if not rows:
            continue
        speedups: list[float] = []
        within: list[tuple[float, float] | None] = []
        for r in rows:
            speedup, ci = speedup_from_pairs(r["baseline_ms"], r["candidate_ms"], confidence)
            speedups.append(speedup)
            within.append(ci if math.isfinite(ci[0]) else None)
        center, ci = combine(speedups, within)
        floor = max(systematic_floor(r.get("calls_per_sample", 1)) for r in rows)
        figures[name] = {
            "speedup": center,
            "speedup_ci": list(widen(ci, floor)) if ci else None,
            "baseline": _sum_stats([summarize(r["baseline_ms"]) for r in rows]).to_dict(),
            "candidate": _sum_stats([summarize(r["candidate_ms"]) for r in rows]).to_dict(),
            "pairs": [len(r["baseline_ms"]) for r in rows],
            "mode": sorted({r.get("mode", "eager") for r in rows}),
        }
    result.details["directions"] = figures


def _sum_stats(stats: list[TimingStats]) -> TimingStats:
    """One call on every shape set: medians and quartiles add up per shape set."""
    return TimingStats(
        median_ms=sum(s.median_ms for s in stats),
        q1_ms=sum(s.q1_ms for s in stats),
        q3_ms=sum(s.q3_ms for s in stats),
        min_ms=sum(s.min_ms for s in stats),
        samples=sum(s.samples for s in stats),
    )
