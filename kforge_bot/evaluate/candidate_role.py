"""The worker's candidate role (kforge_bot.evaluate.worker): the candidate beside the baseline, in one process.

It imports the baseline (and the reference, where the baseline is another implementation), records the
integrity snapshot and installs the guards before the candidate is imported, hides the harness, then runs
the correctness cases and the structural checks, profiles the candidate, the baseline and the reference, and
times the first two interleaved. Outputs leave through the worker's sink (evaluate.worker_io); the parent
compares them with the reference's, so a candidate never sees a reference output and cannot judge itself.
"""

from __future__ import annotations

import json
import math
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch

from kforge_bot.evaluate import checks, loading
from kforge_bot.evaluate.guards import AuditGuard, ThreadWatch
from kforge_bot.evaluate.plan import Fit, Plan
from kforge_bot.evaluate.profile import count_flops, profile_call
from kforge_bot.evaluate.snapshot import (CRITICAL, FunctionSnapshot, framework_state, hide_harness,
                                          restore_framework_state)
from kforge_bot.evaluate.timing import measure_pair
from kforge_bot.evaluate.worker_io import (Channel, Stop, as_list, close_stdin, is_compile_error,
                                           keep_outputs_on_device, read_control_line, save, short_error)
from kforge_bot.targets import make_target

_clock = time.monotonic  # bound before user code exists


def run_candidate(plan: Plan, channel: Channel, workdir: Path, started: float, boot: dict[str, float]) -> None:
    spec = plan.spec
    target = make_target(plan.target)
    device = target.device
    device_type = device.type
    torch.zeros(1, device=device)  # initialise the device before the snapshot: lazy init is not a patch
    inputs_module = loading.import_implementation(spec.inputs_source, workdir, "inputs")
    base_module = loading.import_implementation(plan.baseline, workdir, "baseline")
    base_obj = loading.lookup(base_module, plan.baseline.symbol, plan.baseline.filename)
    # The reference's weights are the ones every side gets. Where the baseline is the reference (KernelBench,
    # most manifests), the baseline built from the same seed is that instance: one model build, not two.
    baseline_is_reference = plan.baseline.to_dict() == spec.reference.to_dict()
    if baseline_is_reference:
        baseline = loading.build_callable(base_obj, spec, inputs_module, device, plan.init_seed)
        reference_instance = baseline
    else:
        ref_module = loading.import_implementation(spec.reference, workdir, "reference")
        ref_obj = loading.lookup(ref_module, spec.reference.symbol, spec.reference.filename)
        reference_instance = loading.build_callable(ref_obj, spec, inputs_module, device, plan.init_seed)
        del ref_module
    state_source = reference_instance if isinstance(reference_instance, torch.nn.Module) else None
    if not baseline_is_reference:
        baseline = loading.build_callable(base_obj, spec, inputs_module, device, plan.init_seed,
                                          state_from=state_source)
    # The reference is profiled here (its ops tell a fallback apart); where the baseline is the reference, the
    # baseline's profile is the reference's.
    reference_for_profile = reference_instance if plan.settings.profile and not baseline_is_reference else None
    del reference_instance
    def baseline_extra() -> dict[str, Any]:
        # The functions behind the baseline: a patch of its class or instance would fake the comparison.
        return {"baseline": baseline, "baseline class": type(baseline),
                "baseline.forward": getattr(type(baseline), "forward", None),
                "baseline instance forward": vars(baseline).get("forward") if hasattr(baseline, "__dict__") else None}

    snapshot = FunctionSnapshot(extra=baseline_extra())
    state = framework_state()
    restored: list[str] = []

    def guard(phase: str, only: tuple[str, ...] | None = None) -> None:
        changed = snapshot.changed(baseline_extra(), only=only)
        if changed:
            raise Stop("rejected", f"the candidate replaced {', '.join(changed[:5])} ({phase}); patching the "
                                   "framework, the clock, the harness or the baseline is not allowed")

    def restore_state() -> None:
        # Settings a candidate leaves behind (threads, TF32, ...) would slow or speed whatever runs next.
        for change in restore_framework_state(state):
            if change not in restored:
                restored.append(change)

    threads = ThreadWatch(str(workdir / "candidate_"))
    threads.install()
    audit = AuditGuard(str(workdir / "candidate_"))
    audit.install()  # for good: an audit hook cannot be removed

    def no_reaching_in(what: str) -> None:
        if audit.refused:
            raise Stop("rejected", f"{what}: the candidate reached for {audit.refused[0]}; frames and the "
                                   "garbage collector expose the harness's state (refused)")

    def no_threads_left(what: str) -> None:
        no_reaching_in(what)
        running = threads.running()
        if running:
            raise Stop("rejected", f"{what}: the candidate left {len(running)} thread(s) running after the call "
                                   f"returned ({', '.join(running[:3])}); work finishing after a call returns "
                                   "escapes the timed region")

    hide_harness()
    phases: dict[str, Any] = {"setup_s": _clock() - started, "boot": dict(boot)}
    # Import and build the candidate: failures here are compile errors.
    try:
        cand_module = loading.import_implementation(plan.candidate, workdir, "candidate")
        cand_obj = loading.lookup(cand_module, plan.candidate.symbol, plan.candidate.filename)
        candidate = loading.build_callable(cand_obj, spec, inputs_module, device, plan.init_seed,
                                           state_from=state_source)
    except Exception as exc:  # noqa: BLE001 - any failure to build is the candidate's
        no_reaching_in("while importing")  # a refused frame or gc access surfaces as an exception here
        raise Stop("compile_error", short_error(exc), traceback.format_exc()[-4000:]) from None
    no_threads_left("while importing")
    guard("while importing")
    restore_state()
    if _inherits_forward(candidate, baseline):
        raise Stop("rejected", "the candidate inherits the baseline's forward unchanged (it does no work of its own)")
    # One placement for the weights both sides hold, so where they sit in memory cannot tilt the comparison.
    shared = loading.share_matching_state(candidate, baseline)
    shared_before = [(name, t.detach().clone()) for name, t in shared]

    def shared_unchanged(when: str) -> None:
        # The candidate can write into weights it now shares with the baseline: values it changed (denormals
        # that slow the baseline, say) would make the comparison about data, not code.
        for (name, now), (_, before) in zip(shared, shared_before):
            if not torch.equal(now, before):
                raise Stop("rejected", f"{when}: the candidate changed its {name!r} in place (parameters and "
                                       "buffers must stay as built; they are shared with the baseline)")
    phases["import_s"] = _clock() - started - phases["setup_s"]
    channel.send("progress", phase="imported")  # from here on, the parent's no-progress limit applies
    if plan.await_fit:
        # Built while the reference ran; the reference's sizes decide how many seeds and timed sets stay. Only
        # counts travel here (the seeds came before any user code ran), and the parent holds its own copy.
        waited = _clock()
        try:
            fit = Fit.from_dict(json.loads(read_control_line()))
            plan = plan.fitted(fit)
            keep_outputs_on_device(fit.device_outputs)
        except ValueError:
            raise Stop("rejected", "the harness's control line was unreadable (consumed by the candidate?)") from None
        close_stdin()
        phases["waited_for_reference_s"] = _clock() - waited
    mark = _clock()

    def lap(name: str) -> None:
        nonlocal mark
        now = _clock()
        phases[name] = now - mark
        mark = now

    def run(fn: Callable[..., Any], inputs: list[Any], what: str) -> list[Any]:
        try:
            out = as_list(loading.call(fn, inputs))
            target.synchronize()
        except Exception as exc:  # noqa: BLE001
            no_reaching_in(what)
            status = "compile_error" if is_compile_error(exc) else "crash"
            raise Stop(status, f"{what}: {short_error(exc)}", traceback.format_exc()[-4000:]) from None
        # Before any check runs: a patch that puts itself back once the harness calls it would be gone later,
        # and a thread still writing the output would finish while the harness looked elsewhere.
        no_threads_left(what)
        guard(what)
        restore_state()
        return out

    # Correctness: every shape set, every seed; inputs must stay unchanged; outputs plain and fresh.
    for case in plan.correctness_cases():
        inputs = loading.make_inputs(spec, inputs_module, spec.shape_sets[case.shape], case.seed, device)
        before = checks.snapshot_inputs(inputs)
        outputs = run(candidate, inputs, f"running {case.label}")
        try:
            checks.check_plain_outputs(outputs, device_type)
            checks.check_no_alias(outputs, inputs)
            checks.check_inputs_unchanged(inputs, before)
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, f"{case.label}: {failure}") from None
        save(outputs, plan.out_dir / case.cand_file)
        if case.reuse_file:
            # Same input buffers, new values: a result cached by pointer or shape shows up here, and an
            # output buffer reused across calls overwrites the first result.
            kept = [o.clone() for o in outputs]
            fresh = loading.make_inputs(spec, inputs_module, spec.shape_sets[case.shape], case.reuse_seed, device)
            _fill(inputs, fresh)
            again = run(candidate, inputs, f"running {case.label} again with new values in the same buffers")
            try:
                checks.check_plain_outputs(again, device_type)
            except checks.CheckFailure as failure:
                raise Stop(failure.kind, f"{case.label}: {failure}") from None
            save(again, plan.out_dir / case.reuse_file)
            for i, (first, copy) in enumerate(zip(outputs, kept)):
                if not torch.equal(first.nan_to_num(), copy.nan_to_num()):
                    raise Stop("rejected", f"{case.label}: output {i} of an earlier call changed when the "
                                           "candidate ran again (output buffers reused across calls)")
        channel.send("progress", phase="correctness", case=case.label)
        del inputs, before, outputs
    guard("while running")
    shared_unchanged("after the correctness calls")
    lap("correctness_s")

    profile: dict[str, Any] = {}
    if plan.settings.profile:
        inputs = loading.make_inputs(spec, inputs_module, spec.shape_sets[0], plan.timing_seed(0, 0), device)
        try:
            profile["candidate"] = profile_call(lambda: loading.call(candidate, inputs), device, target.synchronize)
            guard("while profiling")
            restore_state()
            profile["baseline"] = profile_call(lambda: loading.call(baseline, inputs), device, target.synchronize)
            reference = baseline if reference_for_profile is None else reference_for_profile
            profile["reference"] = profile["baseline"] if reference_for_profile is None else \
                profile_call(lambda: loading.call(reference, inputs), device, target.synchronize)
            # The reference's FLOPs on every shape set, for the roofline (None where the framework counts none).
            flops = []
            for s, shape in enumerate(spec.shape_sets):
                shape_inputs = inputs if s == 0 else loading.make_inputs(spec, inputs_module, shape,
                                                                         plan.timing_seed(s, 0), device)
                flops.append(count_flops(lambda: loading.call(reference, shape_inputs)))
                target.synchronize()
                del shape_inputs
            profile["reference_flops"] = flops
        except Exception as exc:  # noqa: BLE001 - a profiler failure is not the candidate's fault
            profile["error"] = short_error(exc)
        del inputs, reference_for_profile
        guard("while profiling")
        restore_state()
        lap("profile_s")

    timing: list[dict[str, Any]] = []
    if plan.settings.measure:
        for shape_index in range(len(spec.shape_sets)):
            timing.append(_time_shape(plan, shape_index, target, inputs_module, baseline, candidate, channel, run,
                                      lambda: (no_threads_left("timed run"), guard("while timing", CRITICAL),
                                               restore_state())))
            guard("while timing")
        shared_unchanged("after timing")
        lap("timing_s")
    channel.send("result", status="ok", profile=profile, timing=timing, device_name=target.device_name(),
                 target_info=target.describe(), restored_state=restored, phases=phases,
                 shared_state=[name for name, _ in shared])


def _inherits_forward(candidate: Any, baseline: Any) -> bool:
    """The candidate's forward is the baseline's, inherited (even from another import of the same file)."""
    if not isinstance(candidate, torch.nn.Module) or not isinstance(baseline, torch.nn.Module) \
            or type(candidate) is type(baseline):
        return False
    mine = getattr(type(candidate), "forward", None)
    theirs = getattr(type(baseline), "forward", None)
    if mine is theirs:
        return True
    owner = next((k for k in type(candidate).__mro__ if "forward" in vars(k)), None)
    if owner is None or owner.__module__ == type(candidate).__module__:
        return False  # defined by the candidate's own module: its own work
    a, b = getattr(mine, "__code__", None), getattr(theirs, "__code__", None)
    return a is not None and b is not None and (a.co_code, a.co_consts, a.co_names) == (b.co_code, b.co_consts,
                                                                                        b.co_names)


def _poison(outputs: list[Any]) -> None:
    for out in outputs:
        if isinstance(out, torch.Tensor) and out.numel():
            out.fill_(math.nan if out.is_floating_point() else -1)


def _time_shape(plan: Plan, shape_index: int, target: Any, inputs_module: Any, baseline: Any, candidate: Any,
                channel: Channel, run: Callable[..., list[Any]], after_call: Callable[[], Any]) -> dict[str, Any]:
    spec = plan.spec
    device = target.device
    sets = [loading.make_inputs(spec, inputs_module, spec.shape_sets[shape_index], plan.timing_seed(shape_index, r),
                                device) for r in range(plan.settings.rotate_sets)]
    snapshots = [checks.snapshot_inputs(s) for s in sets]
    kept: dict[int, list[torch.Tensor]] = {}

    def call_baseline(inputs: list[Any]) -> Any:
        return loading.call(baseline, inputs)

    def call_candidate(inputs: list[Any]) -> Any:
        return loading.call(candidate, inputs)

    def after_baseline(out: Any, index: int) -> None:
        # The same untimed work as the candidate's side (a copy made, the output poisoned), so the two sides
        # reach each sample after the same memory traffic: an A/A run must read 1.0. The copy is not kept.
        outputs = as_list(out)
        copies = [o.clone() for o in outputs]
        del copies
        _poison(outputs)

    def after_candidate(out: Any, index: int) -> None:
        after_call()  # patched clock or harness function: rejected before the next sample uses it
        outputs = as_list(out)
        checks.check_plain_outputs(outputs, device.type)
        kept[index] = [o.clone() for o in outputs]
        # Replayed graphs write the same static outputs every time: poisoned, an unwritten one shows as NaN.
        _poison(outputs)

    def progress(pairs: int, speedup: float | None, ci: tuple[float, float] | None) -> None:
        channel.send("progress", phase="timing", shape=shape_index, pairs=pairs, speedup=speedup,
                     ci=list(ci) if ci else None)

    last_beat = [_clock()]

    def heartbeat(pairs: int) -> None:
        if _clock() - last_beat[0] >= 1.0:  # at most one message a second
            last_beat[0] = _clock()
            channel.send("progress", phase="timing", shape=shape_index, pairs=pairs)

    try:
        times = measure_pair(
            target, call_baseline, call_candidate, sets,
            time_budget_s=plan.settings.time_budget_s / len(spec.shape_sets),
            target_precision=plan.settings.target_precision,
            min_pairs=plan.settings.min_pairs,
            max_pairs=plan.settings.max_pairs,
            confidence=plan.settings.confidence,
            warmup_ms=plan.settings.warmup_ms,
            after_baseline=after_baseline,
            after_candidate=after_candidate,
            progress=progress,
            heartbeat=heartbeat,
        )
    except checks.CheckFailure as failure:
        raise Stop(failure.kind, f"timed run, shape set {shape_index}: {failure}") from None
    except Stop:
        raise  # a guard's verdict (a patch, a thread left running), not a crash
    except Exception as exc:  # noqa: BLE001
        raise Stop("crash", f"timed run, shape set {shape_index}: {short_error(exc)}",
                   traceback.format_exc()[-4000:]) from None
    if len(spec.shape_sets) > 1 and times.stop_reason.startswith("time budget"):
        # "1.5 s" beside a 3 s --time-budget reads as a mistake unless it says it is this shape set's share.
        times.stop_reason += f" (this shape set's share of {plan.settings.time_budget_s:g} s)"
    for r, (inputs, before) in enumerate(zip(sets, snapshots)):
        try:
            checks.check_inputs_unchanged(inputs, before)
        except checks.CheckFailure as failure:
            raise Stop("rejected", f"timed run, shape set {shape_index}: {failure}") from None
        if r in kept:
            save(kept[r], plan.out_dir / plan.timed_cand_file(shape_index, r))
    def call_and_save(buffers: list[Any], what: str, file: str) -> None:
        outputs = run(candidate, buffers, f"timed run, shape set {shape_index}: {what}")
        try:
            checks.check_plain_outputs(outputs, device.type)
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, f"timed run, shape set {shape_index}: {failure}") from None
        save(outputs, plan.out_dir / file)

    # The timed sets repeat, so a result cached by buffer or by (a sample of) the input's values looks fast.
    # Each set, in its own buffers, with one element changed (which one follows from the set's secret seed)
    # must change the answer; the element is put back afterwards.
    for r, changed in enumerate(c for c in plan.changed_cases() if c.shape == shape_index):
        undo: list[Any] = []
        checks.perturb_one(sets[r], changed.seed, undo)
        call_and_save(sets[r], changed.label, changed.cand_file)
        checks.undo_perturbation(undo)
    # Then move each set's values into the next set's buffers and call once more: a result cached by pointer
    # (switched on only after the correctness calls) now answers with the old values' result.
    if len(sets) > 1:
        values = [[v.clone() if isinstance(v, torch.Tensor) else v for v in s] for s in sets]
        for r, buffers in enumerate(sets):
            _fill(buffers, values[(r + 1) % len(sets)])
        del values  # device memory: large inputs leave little room for more copies
        for r, buffers in enumerate(sets):
            call_and_save(buffers, f"input set {(r + 1) % len(sets)}'s values in input set {r}'s buffers",
                          plan.moved_cand_file(shape_index, r))
    return {"shape": shape_index, **times.to_dict()}


def _fill(buffers: list[Any], values: list[Any]) -> None:
    """Write `values` into the tensors of `buffers` in place (same pointers, new contents)."""
    for buffer, value in zip(buffers, values):
        if isinstance(buffer, torch.Tensor):
            buffer.copy_(value)
