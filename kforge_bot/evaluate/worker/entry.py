"""The child process that runs code: `python -c "from kforge_bot.evaluate.worker.entry import main; main(argv)"
RESULT_FD` (request on stdin; evaluate.sandbox.WorkerProcess starts it).

Two roles, never in the same process:
- `reference`: trusted code only. Computes the reference outputs for every correctness case and every
  timing input set.
- `candidate` (kforge_bot.evaluate.worker.candidate_role): imports the candidate (and the baseline), runs the
  correctness cases and the structural checks, times the candidate and the baseline interleaved, then profiles
  them and the reference. Where base and head each get a worker (Plan.side, evaluate.side_workers), it
  holds one side, and the parent drives the interleaved timing across the two (evaluate.pair_driver).
  Outputs are saved as files, or on a GPU handed over as shared device memory (evaluate.wire.outputs); the parent
  compares them with the reference's, so a candidate never sees a reference output and cannot judge itself.

Messages go to the parent over an inherited pipe as JSON lines carrying a nonce read from stdin (the
request follows on the next line) before any user code is imported (the channel, the sink and the control
lines: kforge_bot.evaluate.worker.worker_io); anything the candidate prints goes to stdout/stderr, which decide
nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kforge_bot.evaluate.worker.parent import die_with_parent

die_with_parent()  # before torch's import (seconds): a bot killed outright leaves no worker behind, stopped or not

# Clocks around torch's import, so a worker's start can be told apart (BOOT: the sandbox's and the interpreter's
# start before _BEGAN, torch's import, then the harness's modules).
_BEGAN = time.monotonic()
import torch  # noqa: E402

_TORCH_AT = time.monotonic()
from kforge_bot.evaluate.worker import calls, importing, loading  # noqa: E402
from kforge_bot.evaluate.wire import checks, heldout, limits  # noqa: E402
from kforge_bot.evaluate.wire import shipped  # noqa: E402
from kforge_bot.evaluate.worker.heap import hold_freed_memory  # noqa: E402
from kforge_bot.evaluate.worker.syscall_filter import forbid_keyrings  # noqa: E402
from kforge_bot.evaluate.worker.shipped_inputs import Recorder  # noqa: E402
from kforge_bot.evaluate.worker.candidate_role import run_candidate  # noqa: E402
from kforge_bot.evaluate.wire.outputs import make_sink  # noqa: E402
from kforge_bot.evaluate.wire.plan import DoesNotFit, Plan, fit_plan  # noqa: E402
from kforge_bot.evaluate.worker.profile import profile_call  # noqa: E402
from kforge_bot.evaluate.worker.worker_io import (Channel, Stop, as_list, device_outputs,  # noqa: E402
                                           export_tensors, keep_outputs_on_device, read_control_line, save, short_error,
                                           use_sink)
from kforge_bot.targets import make_target, unavailable_reason  # noqa: E402

_exit = os._exit  # bound before user code exists
_clock = time.monotonic
STARTED = _clock()
# When this worker had its imports done and its device warmed up (host monotonic clock, shared with the parent,
# which reads its start from them: sandbox.WorkerProcess.boot_phases).
BOOT: dict[str, float] = {"began_at": _BEGAN, "torch_at": _TORCH_AT, "imported_at": STARTED}


def forked() -> None:
    """In a worker forked from the forkserver (evaluate.worker.forkserver), which imported all this once: its own
    start is now, and it imported nothing (torch's import took no time of its own)."""
    global STARTED
    STARTED = _clock()
    BOOT.update(began_at=STARTED, torch_at=STARTED, imported_at=STARTED, forked=1.0)
    BOOT.pop("released_at", None)
    BOOT.pop("ready_at", None)


# ------------------------------------------------------------------------------------------ reference


def run_reference(plan: Plan, channel: Channel, workdir: Path) -> None:
    missing = unavailable_reason(plan.target.split(":")[0])
    if missing:  # the bot took a named target at its word (targets._device_nodes_present)
        raise Stop("unavailable", missing)
    target = make_target(plan.target)
    device = target.device
    device_free, host_free = free_memory(device)  # before this worker holds anything: what evaluations may use
    ref = _Reference.load(plan, workdir, device)
    phases: dict[str, Any] = {"setup_s": _clock() - STARTED, "boot": dict(BOOT)}
    cases = _ReferenceCases(plan, ref, device, channel)
    # First each shape set's first seed, which every plan keeps: its sizes say how much of the plan fits.
    for case in plan.correctness_cases():
        if case.seed == plan.seeds[0]:
            cases.compute(case)
    try:
        fit = fit_plan(plan, cases.input_bytes, cases.output_bytes, device_free, host_free,
                       device_outputs=device_outputs())
    except DoesNotFit as exc:
        raise Stop("too_large", str(exc)) from None
    fit = replace(fit, output_slots=tuple(sorted(cases.slots)))
    plan = plan.fitted(fit)
    keep_outputs_on_device(fit.device_outputs)
    for case in plan.all_cases():
        if case.ref_file not in cases.done:
            cases.compute(case)
    phases["cases_s"] = _clock() - STARTED - phases["setup_s"]
    held_started = _clock()
    fit = replace(fit, heldout=tuple(v.to_dict() for v in reference_heldout(
        plan, ref.inputs_module, ref.module, ref.obj, ref.call, device, frozenset(cases.slots), channel,
        ref.recorder)))
    phases["heldout_s"] = _clock() - held_started
    # No profile here: the candidate's worker profiles the reference beside the baseline and the candidate, with
    # the profiler it warmed up while this worker ran (its first use costs seconds in a fresh process).
    # The slowest case (inputs made, the call, the outputs saved) sets how long a candidate's case may run.
    channel.send("result", status="ok", device_name=target.device_name(), fit=fit.to_dict(),
                 target_info=target.describe(), input_bytes=cases.input_bytes, output_bytes=cases.output_bytes,
                 slowest_case_s=cases.slowest, phases=phases, nothing_to_change=cases.nothing_to_change)


@dataclass(frozen=True)
class _Reference:
    """The kernel's inputs module and its reference, imported, looked up and wrapped as a call (`call`)."""

    inputs_module: Any
    module: Any
    obj: Any
    call: Any
    recorder: Recorder | None = None  # where the head's worker gets its inputs as files (Plan.ship_inputs)

    @classmethod
    def load(cls, plan: Plan, workdir: Path, device: torch.device) -> _Reference:
        spec = plan.spec
        inputs_module = importing.import_implementation(spec.inputs_source, workdir, "inputs", spec.support)
        recorder = None
        if plan.ship_inputs:
            recorder = Recorder(plan.out_dir / shipped.FOLDER, export=export_tensors)
            recorder.install(inputs_module, spec.inputs_symbol, spec.init_symbol)
        ref_module = importing.import_implementation(spec.reference, workdir, "reference", spec.support)
        ref_obj = loading.lookup(ref_module, spec.reference.symbol, spec.reference.filename)
        instance = loading.build_callable(ref_obj, spec, inputs_module, device, plan.init_seed)
        if recorder is not None:
            recorder.weights(instance)
            recorder.forward(ref_obj)
        call = calls.wrap(ref_obj, instance, spec, own_oracle=spec.reference_returns == "outputs", module=ref_module)
        return cls(inputs_module, ref_module, ref_obj, call, recorder)


class _ReferenceCases:
    """The reference's outputs case by case, saved for the parent, and what they tell the plan: each shape set's
    largest inputs and outputs in bytes (the compulsory traffic for the roofline, and the memory budget), the
    slowest case, the cases done, and the inputs the reference writes its outputs into (GPU MODE's output
    buffers: `slots`)."""

    def __init__(self, plan: Plan, ref: _Reference, device: torch.device, channel: Channel) -> None:
        self.plan, self.ref, self.device, self.channel = plan, ref, device, channel
        self.input_bytes: list[int] = [0] * len(plan.spec.shape_sets)
        self.output_bytes: list[int] = [0] * len(plan.spec.shape_sets)
        self.slowest = 0.0
        self.done: set[str] = set()
        self.slots: set[int] = set()
        self.probed = False  # whether the inputs were probed for output buffers the reference never reads (once)
        # A changed-elements case whose inputs had nothing to change (no floating-point input that is neither an
        # output buffer nor kept, `keep_values`): the check after timing then changed nothing, and says so.
        self.nothing_to_change = False

    def compute(self, case: Any) -> None:
        spec, ref, device = self.plan.spec, self.ref, self.device
        case_started = _clock()
        inputs = loading.make_inputs(spec, ref.inputs_module, spec.shape_sets[case.shape], case.seed, device)
        input_count = len(inputs)
        self.input_bytes[case.shape] = max(self.input_bytes[case.shape], _tensor_bytes(inputs))
        if case.perturbed and not checks.perturb_elements(inputs, case.seed,
                                                          skip=heldout.left_alone(self.slots, spec.keep_values)):
            self.nothing_to_change = True
        if isinstance(ref.call, calls.EntryCall):
            ref.call.bind(inputs, case.seed)  # its upstream gradients: the candidate's worker draws the same
            ref.call.copy_inplace = True
        outputs = as_list(loading.call(ref.call, inputs))
        checks.check_plain_outputs(outputs, device.type)
        if spec.data_arg and not case.perturbed:
            self.slots.update(checks.output_slots(outputs, inputs))
        self.output_bytes[case.shape] = max(self.output_bytes[case.shape], _tensor_bytes(outputs))
        del inputs
        save(outputs, self.plan.out_dir / case.ref_file)
        self.done.add(case.ref_file)
        self.slowest = max(self.slowest, _clock() - case_started)
        if spec.data_arg and not case.perturbed and not self.probed:  # after the case's time: the probe is no case
            self._probe_unread_inputs(case, outputs, input_count)
        self.channel.send("progress", phase="reference", case=case.label, output_bytes=_tensor_bytes(outputs))

    def _probe_unread_inputs(self, case: Any, outputs: list[Any], input_count: int) -> None:
        """GPU MODE's matmul returns a @ b and leaves data's c for submissions to write: inputs the reference never
        reads are output buffers too."""
        spec, ref, device = self.plan.spec, self.ref, self.device
        self.probed = True
        self.slots.update(checks.unread_inputs(
            lambda: loading.make_inputs(spec, ref.inputs_module, spec.shape_sets[case.shape], case.seed, device),
            lambda values: as_list(loading.call(ref.call, values)), outputs, case.seed, input_count))


def reference_heldout(plan: Plan, inputs_module: Any, ref_module: Any, ref_obj: Any, reference: Any,
                      device: torch.device, slots: frozenset[int], channel: Channel,
                      recorder: Recorder | None = None) -> list[heldout.Variant]:
    """Each held-out variant in the first form the reference runs with finite outputs (their outputs saved as
    the variant's case), or skipped with every form's reason: a variant the reference cannot run is never held
    against a candidate."""
    listed_init = loading.init_key(plan.spec, inputs_module)
    settled: list[heldout.Variant] = []
    for forms in plan.heldout_forms():
        reasons: list[str] = []
        for form in forms:
            case = plan.heldout_case(form)
            if recorder is not None:
                recorder.context = shipped.form_context(form)
            try:
                outputs = _reference_form(plan, form, inputs_module, ref_module, ref_obj, reference, device, slots,
                                          listed_init, recorder)
            except Exception as exc:  # noqa: BLE001 - the reference cannot run this form: the next one, or skipped
                reasons.append(f"{heldout.form_text(form)}: {short_error(exc)[:200]}")
                continue
            finally:
                if recorder is not None:
                    recorder.context = shipped.LISTED
            save(outputs, plan.out_dir / case.ref_file)
            del outputs
            settled.append(replace(form, attempts=tuple(reasons)))
            channel.send("progress", phase="reference", case=case.label)
            break
        else:
            if forms:
                settled.append(heldout.skipped(forms, reasons))
    return settled


def _reference_form(plan: Plan, form: heldout.Variant, inputs_module: Any, ref_module: Any, ref_obj: Any,
                    reference: Any, device: torch.device, slots: frozenset[int], listed_init: str,
                    recorder: Recorder | None = None) -> list[Any]:
    """The reference's outputs on one form of a variant (its own frame: a form too large for the device leaves
    nothing behind for the next). Raises where the reference cannot run it, or gives non-finite outputs on changed
    values."""
    spec = plan.spec
    with heldout.module_globals([inputs_module, ref_module], form):
        call = reference
        if loading.init_key(spec, inputs_module) != listed_init:  # sizes get_init_inputs reads: built again
            instance = loading.build_callable(ref_obj, spec, inputs_module, device, plan.init_seed)
            if recorder is not None:
                recorder.weights(instance)
            call = calls.wrap(ref_obj, instance, spec, own_oracle=spec.reference_returns == "outputs",
                              module=ref_module)
        inputs = loading.make_inputs(spec, inputs_module, heldout.shape_of(form, spec.shape_sets[form.base]),
                                     form.seed, device)
        heldout.change_values(inputs, form.values, form.seed, heldout.left_alone(slots, spec.keep_values))
        if isinstance(call, calls.EntryCall):
            call.bind(inputs, form.seed)
            call.copy_inplace = True
        outputs = as_list(loading.call(call, inputs))
    checks.check_plain_outputs(outputs, device.type)
    if form.values is not None and not all(bool(torch.isfinite(o).all()) for o in outputs if o.is_floating_point()):
        raise ValueError("non-finite outputs on the changed values")
    return outputs


def run_imports(plan: Plan, channel: Channel, workdir: Path) -> None:
    """`list --import`: each kernel's inputs, reference and entry imported and looked up, nothing called. The
    kernels of one batch (plan.also) share the worker and the library's import: a package is imported as written,
    once, and each entry looked up in it; `imports` holds each kernel's problem (None: it imports)."""
    problems: list[str | None] = []
    for n, spec in enumerate([plan.spec, *plan.also]):
        try:
            for tag, impl in (("inputs", spec.inputs_source), ("reference", spec.reference),
                              ("kernel", spec.baseline)):
                module = importing.import_as_written(impl, workdir, f"{tag}{n}")
                loading.lookup(module, impl.symbol, impl.filename)
        except Exception as exc:  # noqa: BLE001 - this kernel's import, said in one line; the next one still runs
            problems.append(short_error(exc))
        else:
            problems.append(None)
    first = problems[0]
    channel.send("result", status="ok" if first is None else "error", reason=first, imports=problems)


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
    forbid_keyrings()  # before any user code: the kernel's keyrings are shared beyond any sandbox's walls
    hold_freed_memory()  # before any timed call: what one sample frees, the next reuses without page faults
    if len(argv) > 2:
        if argv[3:] == ["hold"]:  # started during someone's timed run: touch the device only once that is over
            read_control_line()
            BOOT["released_at"] = _clock()
        warm_up(argv[1], profiler=argv[2] == "profiler")
    BOOT["ready_at"] = _clock()
    nonce = sys.stdin.readline().strip()
    channel = Channel(fd, nonce)
    plan = Plan.from_dict(json.loads(sys.stdin.readline()))
    if plan.limits is not None:
        limits.apply(plan.limits)  # before any user code: nothing it starts can raise them again
    os.environ.update(plan.spec.env)  # the manifest's `env:` (allowlisted names, from the base's manifest)
    if not plan.await_fit:
        sys.stdin.close()
    use_sink(make_sink(int(output_fd) if output_fd else None, nonce, plan.target, trusted=plan.role == "reference"))
    global STARTED
    STARTED = _clock()  # the request's arrival: phases count from here (the worker may have started early)
    workdir = plan.out_dir / f"src_{plan.role}"
    workdir.mkdir(parents=True, exist_ok=True)
    threads = plan.threads or plan.settings.cpu_threads
    if threads:  # the policy's evaluation.cpu_threads: torch's pool, and OpenMP's for kernels built with it
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
    # torch.compile's compile workers would outlive the build as processes beside every timed sample, which the
    # harness refuses (shape_timing.ShapeTiming.no_helper_processes): compile in the worker's own process.
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    try:
        if plan.role == "reference":
            run_reference(plan, channel, workdir)
        elif plan.role == "imports":
            run_imports(plan, channel, workdir)
        else:
            run_candidate(plan, channel, workdir, STARTED, BOOT)
    except Stop as stop:
        channel.send("result", status=stop.status, reason=stop.reason, detail=stop.detail, side=stop.side)
    except Exception as exc:  # noqa: BLE001 - in the reference role this is the user's spec failing
        channel.send("result", status="error", reason=short_error(exc), detail=traceback.format_exc()[-4000:])
    sys.stdout.flush()
    sys.stderr.flush()
    _exit(0)  # skip atexit handlers and finalizers: nothing may run after the result is sent
    return 0  # pragma: no cover


if __name__ == "__main__":
    main(sys.argv[1:])
