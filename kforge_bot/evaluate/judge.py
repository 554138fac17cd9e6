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
from kforge_bot.evaluate.wire import conditions, heldout, outputs
from kforge_bot.evaluate.wire.plan import Case, Plan
from kforge_bot.evaluate.wire.result import DIRECTIONS, EvalResult, EvalSettings, TimingStats, directions_text
from kforge_bot.evaluate.wire.shapes import DEFINITION, ShapeSpeedup, combine, regression_text
from kforge_bot.evaluate.sandbox import WorkerOutcome
from kforge_bot.evaluate.wire.stats import speedup_from_pairs, summarize, systematic_floor, widen
from kforge_bot.targets import target_kind


def judge(plan: Plan, outcome: WorkerOutcome, ref_outputs: dict[str, list[Any]],
          ref_result: dict[str, Any]) -> EvalResult:
    """The verdict on the candidate's worker: how it ended, then its outputs against the reference's, its
    profile, and its timing (statistics from the raw samples, checked against the hardware's floor)."""
    base = EvalResult(verdict="crash", reason="", target=plan.target,
                      device_name=ref_result.get("device_name", ""), target_info=ref_result.get("target_info", {}))
    base.details = {"harness_version": harness_version(), "wall_s": round(outcome.wall_s, 3),
                    "log_tail": outcome.log_tail[-4000:],
                    "isolation": isolation.probe().describe() if outcome.sandboxed else "not sandboxed"}
    if ref_result.get("input_bytes") is not None:
        base.details["input_bytes"] = ref_result["input_bytes"]  # per shape set, tensors only
    if outcome.forged_lines:
        base.details["forged_lines"] = outcome.forged_lines
    if _ended_without_result(base, outcome):
        return base
    message = outcome.result
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
    if outcome.shared is not None and outcome.shared.rejected:
        base.verdict, base.reason = "rejected", f"the candidate's output channel carried {outcome.shared.rejected}"
        return base
    correctness = _compare_all(plan, ref_outputs, timed=bool(message.get("timing")), shared=outcome.shared,
                               saved=message.get("saved"))
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
        _attach_timing(base, timing, plan.settings, plan.spec.shape_sets)
        _attach_directions(base, timing, plan.settings.confidence)
        broken = _physical_bound(base, plan, ref_outputs, ref_result)
        if broken:
            base.verdict, base.reason = "rejected", broken
            base.speedup = base.speedup_ci = None
            base.per_shape = []
            return base
        several = " (geometric mean over the shape sets)" if len(base.per_shape) > 1 else ""
        if base.speedup_ci is not None:
            base.reason = (f"correct on every case; {base.speedup:.3f}x{several} "
                           f"(CI {base.speedup_ci[0]:.3f}-{base.speedup_ci[1]:.3f})")
        elif base.speedup is not None:
            base.reason = f"correct on every case; {base.speedup:.3f}x{several} ({base.details['speedup_ci_note']})"
        slow = regression_text(base.per_shape)
        if slow:
            base.reason += f"; but {slow}"
        if base.details.get("directions"):  # a backward: the headline is forward+backward; each direction said
            base.reason += "; " + directions_text(base.details["directions"])
        disturbed = _attach_conditions(base, plan.settings)
        if disturbed:
            base.verdict = "inconclusive"
            base.reason = f"timing disturbed: {disturbed}; not a verdict on its speed ({base.reason})"
    return base


def _attach_conditions(result: EvalResult, settings: EvalSettings) -> str | None:
    """Each shape set's timing conditions (evaluate.wire.conditions) summarised in `details.conditions`, and the one
    line saying what disturbed the timing where the policy's limits say it was (else None)."""
    limits = conditions.policy_limits(settings.max_preempted_share, settings.max_preempted_gap,
                                      settings.max_crowded_share)
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


def _compare_all(plan: Plan, ref_outputs: dict[str, list[Any]], timed: bool,
                 shared: outputs.SharedOutputs | None = None, saved: Any = None) -> dict[str, Any]:
    """Every case's outputs against the reference's. `saved` is the worker's word, over its nonce channel, on
    what it saved: each file's digest (None: handed over as device memory). The files lie in the worker's
    scratch, which the candidate's code can write, so a file must be one the worker saved, still hold what it
    wrote, and not have gone missing."""
    from kforge_bot.evaluate.wire.checks import compare_outputs, comparison_device  # imports torch (see module doc)
    from kforge_bot.evaluate.wire.tensorfile import ChangedTensorFile

    records: list[dict[str, Any]] = []
    tolerance = plan.spec.tolerance
    device = comparison_device(plan.target)
    handed_over = shared.names() if shared is not None else set()
    via: set[str] = set()  # how the candidate's outputs came back

    digests: dict[str, Any] = saved if isinstance(saved, dict) else {}

    def written(name: str) -> bool:
        return name in handed_over or name in digests

    def check(case: Case, cand_file: str, ref_file: str, label: str) -> str | None:
        on_disk = (plan.out_dir / cand_file).is_file()
        if cand_file not in handed_over:
            if cand_file in digests and not on_disk:
                return f"rejected|{label}: the output the harness saved is gone (deleted by the candidate?)"
            if not on_disk:
                return f"rejected|{label}: the candidate's process produced no output for this case"
            if not isinstance(digests.get(cand_file), str):
                (plan.out_dir / cand_file).unlink(missing_ok=True)
                return f"rejected|{label}: an output file the harness never saved (written by the candidate?)"
        via.add("device memory" if cand_file in handed_over else "files")
        try:
            cand = outputs.load(plan.out_dir, cand_file, shared, digests.get(cand_file))
        except ChangedTensorFile:
            return f"rejected|{label}: the output file was changed after the harness saved it"
        except Exception as exc:  # noqa: BLE001 - a forged or truncated output is the candidate's problem
            return f"rejected|{label}: unreadable output ({type(exc).__name__}: {str(exc)[:200]})"
        finally:
            (plan.out_dir / cand_file).unlink(missing_ok=True)  # compared once; outputs must not pile up
        ref = ref_outputs[ref_file]
        per_output = compare_outputs(cand, ref, tolerance, device, gradients=len(plan.spec.grad_inputs),
                                     gradient_override=plan.spec.backward_tolerance)
        del cand
        records.append({"case": label, "shape_set": case.shape, "seed": case.seed, "outputs": per_output})
        bad = next((o for o in per_output if not o["ok"]), None)
        return f"incorrect|{label}: {_output_name(plan, bad['index'], len(per_output))}: {bad['problem']}" \
            if bad else None

    failure = None
    for case in plan.correctness_cases():
        failure = check(case, case.cand_file, case.ref_file, case.label)
        if failure is None and case.reuse_file and case.reuse_ref_file:
            failure = check(case, case.reuse_file, case.reuse_ref_file,
                            f"{case.label}, called again with seed {case.reuse_seed}'s values in the same buffers")
            if failure and failure.startswith("incorrect|"):
                failure = "rejected|" + failure.split("|", 1)[1] + " (result cached across calls?)"
        if failure:
            break
    for case in plan.heldout_cases() if failure is None else ():
        failure = check(case, case.cand_file, case.ref_file, case.label)
        if failure:
            break
    if failure is None:
        for case in plan.timing_cases():
            if not written(case.cand_file) and not (plan.out_dir / case.cand_file).is_file():
                continue  # a very slow kernel may not reach every rotated set; the ones it saved are checked
            failure = check(case, case.cand_file, case.ref_file, case.label)
            if failure:
                break
    # After timing, these values (or nearly these) passed moments before: a wrong answer is read as a cache.
    after_timing = ((plan.changed_cases(), "input buffer or values"), (plan.moved_cases(), "input buffer")) \
        if timed else ()
    for cases, keyed_by in after_timing:
        for case in cases:
            if failure is not None:
                break
            failure = check(case, case.cand_file, case.ref_file, case.label)
            if failure and failure.startswith("incorrect|"):
                failure = "rejected|" + failure.split("|", 1)[1] + f" (result cached by {keyed_by}?)"
    return _correctness_summary(plan, records, via, failure)


def _output_name(plan: Plan, index: int, count: int) -> str:
    """'output 0', or for a kernel with a backward (its gradients come last) 'the gradient of input x'."""
    grads = plan.spec.grad_inputs
    first = count - len(grads)
    if grads and index >= first:
        written = ", as written into it" if grads[index - first] in plan.spec.grad_inplace else ""
        return f"the gradient of input {grads[index - first]}{written} (output {index})"
    return f"output {index}"


def _correctness_summary(plan: Plan, records: list[dict[str, Any]], via: set[str],
                         failure: str | None) -> dict[str, Any]:
    worst_abs = max((o.get("max_abs", 0.0) for r in records for o in r["outputs"]), default=0.0)
    worst_rel = max((o.get("rel_norm", 0.0) for r in records for o in r["outputs"]), default=0.0)
    summary: dict[str, Any] = {
        "ok": failure is None,
        "seeds": plan.seeds,
        "shape_sets": list(plan.spec.shape_sets),
        "cases_checked": len(records),
        "timed_outputs_checked": sum(1 for r in records if r["case"].startswith("timed run")),
        "outputs_via": sorted(via),
        "max_abs_error": worst_abs,
        "max_rel_norm_error": worst_rel,
        "tolerance": plan.spec.tolerance or "by dtype",
        **({"backward_tolerance": plan.spec.backward_tolerance} if plan.spec.backward_tolerance else {}),
        "checks": ["shape and dtype", "NaN/Inf", "elementwise atol/rtol", "relative norm", "non-constant",
                   "inputs unchanged", "no aliasing", "plain tensors", "same buffers new values",
                   "earlier outputs not overwritten", "timed outputs", "elements of each timed input set changed",
                   "values moved between timed buffers"],
        "records": records,
        "heldout": heldout_summary(plan),
    }
    if failure:
        summary["status"], summary["reason"] = failure.split("|", 1)
    return summary


def heldout_summary(plan: Plan) -> list[dict[str, Any]]:
    """Each held-out variant as checked (its label), or skipped and why (the reference could not run it)."""
    out = []
    for data in plan.heldout or ():
        variant = heldout.Variant.from_dict(data)
        entry: dict[str, Any] = {"variant": variant.index, "label": variant.label, "sizes": variant.sizes,
                                 "seed": variant.seed}
        if variant.skipped:
            entry["skipped"] = variant.skipped
        elif variant.attempts:
            entry["reference_could_not_run"] = list(variant.attempts)
        out.append(entry)
    return out


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
