"""The child process that runs code: `python -m kforge_bot.evaluate.worker RESULT_FD` (request on stdin).

Two roles, never in the same process:
- `reference`: trusted code only. Computes the reference outputs for every correctness case and every
  timing input set.
- `candidate`: imports the candidate (and the baseline), runs the correctness cases and the structural
  checks, profiles the candidate, the baseline and the reference, and times the first two interleaved.
  Outputs are saved as files, or on a GPU handed over as shared device memory (evaluate.outputs); the parent
  compares them with the reference's, so a candidate never sees a reference output and cannot judge itself.

Messages go to the parent over an inherited pipe as JSON lines carrying a nonce read from stdin (the
request follows on the next line) before any user code is imported; anything the candidate prints goes to
stdout/stderr, which decide nothing.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch

from kforge_bot.evaluate import checks, loading
from kforge_bot.evaluate.guards import AuditGuard, ThreadWatch
from kforge_bot.evaluate.outputs import DeviceSink, FileSink, make_sink
from kforge_bot.evaluate.plan import DoesNotFit, Fit, Plan, fit_plan
from kforge_bot.evaluate.profile import count_flops, profile_call
from kforge_bot.evaluate.snapshot import CRITICAL, FunctionSnapshot, framework_state, hide_harness, restore_framework_state
from kforge_bot.evaluate.timing import measure_pair
from kforge_bot.targets import make_target, unavailable_reason

_write = os.write  # bound before user code exists
_stdin_readline = sys.stdin.readline  # the original stdin's: a candidate replacing sys.stdin cannot feed it
_stdin_close = sys.stdin.close
_dumps = json.dumps
_exit = os._exit
_clock = time.monotonic
STARTED = _clock()
# When this worker had its imports done and its device warmed up (host monotonic clock, shared with the parent,
# which reads its start from them: sandbox.WorkerProcess.boot_phases).
BOOT: dict[str, float] = {"imported_at": STARTED}


class Channel:
    def __init__(self, fd: int, nonce: str) -> None:
        self.fd = fd
        self.nonce = nonce

    def send(self, kind: str, **payload: Any) -> None:
        line = _dumps({"nonce": self.nonce, "type": kind, **payload}, default=str) + "\n"
        data = line.encode()
        while data:
            written = _write(self.fd, data)
            data = data[written:]


class Stop(Exception):
    """Ends the candidate role early with a verdict (compile_error, crash, rejected, incorrect)."""

    def __init__(self, status: str, reason: str, detail: str = ""):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.detail = detail


def _short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # Compiler errors are long; keep the lines that say what went wrong.
    keep = [ln for ln in lines if "error" in ln.lower()] or lines
    return " | ".join(keep[:6])[:2000]


def _is_compile_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    module = type(exc).__module__ or ""
    text = str(exc)
    return bool(
        names & {"CompilationError", "CompileTimeAssertionFailure", "SyntaxError", "ImportError",
                 "ModuleNotFoundError", "NameError"}
        or module.startswith("triton.compiler")
        or "Error building extension" in text
        or "ninja: build stopped" in text
        or "error: command" in text and "failed" in text
    )


def _as_list(value: Any) -> list[Any]:
    return checks.flatten_outputs(value)


_SINK: FileSink | DeviceSink = FileSink()  # set in main() from the request, before any user code runs


def _save(outputs: list[torch.Tensor], path: Path) -> None:
    _SINK.save(outputs, path)


def _device_outputs() -> bool:
    """Whether outputs stay on the device (shared memory) rather than pass through the host's."""
    return isinstance(_SINK, DeviceSink) and not _SINK.unavailable


def _keep_outputs_on_device(allowed: bool) -> None:
    """The memory budget's word (plan.fit_plan): outputs too large to keep on the device go through the host."""
    if not allowed and isinstance(_SINK, DeviceSink):
        _SINK.unavailable = _SINK.unavailable or "the memory budget keeps outputs in host memory"


# ------------------------------------------------------------------------------------------ reference


def run_reference(plan: Plan, channel: Channel, workdir: Path) -> None:
    spec = plan.spec
    missing = unavailable_reason(plan.target.split(":")[0])
    if missing:  # the bot took a named target at its word (targets._device_nodes_present)
        raise Stop("unavailable", missing)
    target = make_target(plan.target)
    device = target.device
    device_free, host_free = free_memory(device)  # before this worker holds anything: what evaluations may use
    inputs_module = loading.import_implementation(spec.inputs_source, workdir, "inputs")
    ref_module = loading.import_implementation(spec.reference, workdir, "reference")
    ref_obj = loading.lookup(ref_module, spec.reference.symbol, spec.reference.filename)
    reference = loading.build_callable(ref_obj, spec, inputs_module, device, plan.init_seed)
    input_bytes: list[int] = [0] * len(spec.shape_sets)
    output_bytes: list[int] = [0] * len(spec.shape_sets)
    phases: dict[str, Any] = {"setup_s": _clock() - STARTED, "boot": dict(BOOT)}
    slowest = 0.0
    done: set[str] = set()

    def compute(case: Any) -> None:
        nonlocal slowest
        case_started = _clock()
        inputs = loading.make_inputs(spec, inputs_module, spec.shape_sets[case.shape], case.seed, device)
        # Sizes: the compulsory traffic for the roofline, and the memory budget.
        input_bytes[case.shape] = max(input_bytes[case.shape], _tensor_bytes(inputs))
        if case.perturbed:
            checks.perturb_one(inputs, case.seed)
        outputs = _as_list(loading.call(reference, inputs))
        checks.check_plain_outputs(outputs, device.type)
        output_bytes[case.shape] = max(output_bytes[case.shape], _tensor_bytes(outputs))
        del inputs
        _save(outputs, plan.out_dir / case.ref_file)
        done.add(case.ref_file)
        slowest = max(slowest, _clock() - case_started)
        channel.send("progress", phase="reference", case=case.label, output_bytes=_tensor_bytes(outputs))

    # First each shape set's first seed, which every plan keeps: its sizes say how much of the plan fits.
    for case in plan.correctness_cases():
        if case.seed == plan.seeds[0]:
            compute(case)
    try:
        fit = fit_plan(plan, input_bytes, output_bytes, device_free, host_free, device_outputs=_device_outputs())
    except DoesNotFit as exc:
        raise Stop("too_large", str(exc)) from None
    plan = plan.fitted(fit)
    _keep_outputs_on_device(fit.device_outputs)
    for case in plan.all_cases():
        if case.ref_file not in done:
            compute(case)
    phases["cases_s"] = _clock() - STARTED - phases["setup_s"]
    # No profile here: the candidate's worker profiles the reference beside the baseline and the candidate, with
    # the profiler it warmed up while this worker ran (its first use costs seconds in a fresh process).
    # The slowest case (inputs made, the call, the outputs saved) sets how long a candidate's case may run.
    channel.send("result", status="ok", device_name=target.device_name(), fit=fit.to_dict(),
                 target_info=target.describe(), input_bytes=input_bytes, output_bytes=output_bytes,
                 slowest_case_s=slowest, phases=phases)


def _tensor_bytes(values: list[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in values if isinstance(t, torch.Tensor))


def free_memory(device: torch.device) -> tuple[int | None, int]:
    """(device bytes free or None where the device's memory is the host's, host bytes available).
    KFORGE_MEMORY_BUDGET (bytes; K, M, G suffixes) caps both: a machine shared with other work, and tests."""
    device_free = None
    if device.type == "cuda":
        device_free = torch.cuda.mem_get_info(device)[0]
    elif device.type == "xpu" and hasattr(torch.xpu, "mem_get_info"):
        device_free = torch.xpu.mem_get_info(device)[0]
    host_free = _host_available()
    cap = _parse_bytes(os.environ.get("KFORGE_MEMORY_BUDGET", ""))
    if cap:
        device_free = None if device_free is None else min(device_free, cap)
        host_free = min(host_free, cap)
    return device_free, host_free


def _host_available() -> int:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _parse_bytes(text: str) -> int | None:
    text = text.strip().upper().removesuffix("B")
    if not text:
        return None
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(text[-1], 1)
    try:
        return int(float(text.rstrip("KMGT")) * scale)
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------ candidate


def run_candidate(plan: Plan, channel: Channel, workdir: Path) -> None:
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
    phases: dict[str, Any] = {"setup_s": _clock() - STARTED, "boot": dict(BOOT)}
    # Import and build the candidate: failures here are compile errors.
    try:
        cand_module = loading.import_implementation(plan.candidate, workdir, "candidate")
        cand_obj = loading.lookup(cand_module, plan.candidate.symbol, plan.candidate.filename)
        candidate = loading.build_callable(cand_obj, spec, inputs_module, device, plan.init_seed,
                                           state_from=state_source)
    except Exception as exc:  # noqa: BLE001 - any failure to build is the candidate's
        no_reaching_in("while importing")  # a refused frame or gc access surfaces as an exception here
        raise Stop("compile_error", _short_error(exc), traceback.format_exc()[-4000:]) from None
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
    phases["import_s"] = _clock() - STARTED - phases["setup_s"]
    channel.send("progress", phase="imported")  # from here on, the parent's no-progress limit applies
    if plan.await_fit:
        # Built while the reference ran; the reference's sizes decide how many seeds and timed sets stay. Only
        # counts travel here (the seeds came before any user code ran), and the parent holds its own copy.
        waited = _clock()
        try:
            fit = Fit.from_dict(json.loads(_stdin_readline()))
            plan = plan.fitted(fit)
            _keep_outputs_on_device(fit.device_outputs)
        except ValueError:
            raise Stop("rejected", "the harness's control line was unreadable (consumed by the candidate?)") from None
        _stdin_close()
        phases["waited_for_reference_s"] = _clock() - waited
    mark = _clock()

    def lap(name: str) -> None:
        nonlocal mark
        now = _clock()
        phases[name] = now - mark
        mark = now

    def run(fn: Callable[..., Any], inputs: list[Any], what: str) -> list[Any]:
        try:
            out = _as_list(loading.call(fn, inputs))
            target.synchronize()
        except Exception as exc:  # noqa: BLE001
            no_reaching_in(what)
            status = "compile_error" if _is_compile_error(exc) else "crash"
            raise Stop(status, f"{what}: {_short_error(exc)}", traceback.format_exc()[-4000:]) from None
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
        _save(outputs, plan.out_dir / case.cand_file)
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
            _save(again, plan.out_dir / case.reuse_file)
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
            profile["error"] = _short_error(exc)
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
        outputs = _as_list(out)
        copies = [o.clone() for o in outputs]
        del copies
        _poison(outputs)

    def after_candidate(out: Any, index: int) -> None:
        after_call()  # patched clock or harness function: rejected before the next sample uses it
        outputs = _as_list(out)
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
        raise Stop("crash", f"timed run, shape set {shape_index}: {_short_error(exc)}",
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
            _save(kept[r], plan.out_dir / plan.timed_cand_file(shape_index, r))
    def call_and_save(buffers: list[Any], what: str, file: str) -> None:
        outputs = run(candidate, buffers, f"timed run, shape set {shape_index}: {what}")
        try:
            checks.check_plain_outputs(outputs, device.type)
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, f"timed run, shape set {shape_index}: {failure}") from None
        _save(outputs, plan.out_dir / file)

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


# --------------------------------------------------------------------------------------------- main


def warm_up(target_name: str, profiler: bool) -> None:
    """Trusted work done before the request arrives, while the bot is busy elsewhere: the device's context
    (a second or more on a GPU) and, for a worker that will profile, the framework profiler's first use
    (CUPTI loads: 4-6 s measured on an H200). Failures are left for the real run to report."""
    if target_name.split(":")[0] == "cpu":
        return
    try:
        target = make_target(target_name)
        device = target.device
        marker = torch.zeros(1, device=device)
        target.synchronize()
        if profiler:
            profile_call(lambda: marker.add_(1), device, target.synchronize)
    except Exception:  # noqa: BLE001 - no device here, or no profiler: the request's run says so properly
        pass


def main(argv: list[str]) -> int:
    # "RESULT_FD" or "RESULT_FD:OUTPUT_FD" (a socket for outputs handed over as device memory).
    result_fd, _, output_fd = argv[0].partition(":")
    fd = int(result_fd)
    if len(argv) > 2:
        if argv[3:] == ["hold"]:  # started during someone's timed run: touch the device only once that is over
            _stdin_readline()
            BOOT["released_at"] = _clock()
        warm_up(argv[1], profiler=argv[2] == "profiler")
    BOOT["ready_at"] = _clock()
    nonce = sys.stdin.readline().strip()
    channel = Channel(fd, nonce)
    plan = Plan.from_dict(json.loads(sys.stdin.readline()))
    if not plan.await_fit:
        sys.stdin.close()
    global _SINK
    _SINK = make_sink(int(output_fd) if output_fd else None, nonce, plan.target)
    global STARTED
    STARTED = _clock()  # the request's arrival: phases count from here (the worker may have started early)
    workdir = plan.out_dir / f"src_{plan.role}"
    workdir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(plan.threads) if plan.threads else None
    try:
        if plan.role == "reference":
            run_reference(plan, channel, workdir)
        else:
            run_candidate(plan, channel, workdir)
    except Stop as stop:
        channel.send("result", status=stop.status, reason=stop.reason, detail=stop.detail)
    except Exception as exc:  # noqa: BLE001 - in the reference role this is the user's spec failing
        channel.send("result", status="error", reason=_short_error(exc), detail=traceback.format_exc()[-4000:])
    sys.stdout.flush()
    sys.stderr.flush()
    _exit(0)  # skip atexit handlers and finalizers: nothing may run after the result is sent
    return 0  # pragma: no cover


if __name__ == "__main__":
    main(sys.argv[1:])
