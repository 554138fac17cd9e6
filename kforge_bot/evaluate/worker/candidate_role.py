"""The worker's candidate role (kforge_bot.evaluate.worker.entry): the candidate, and the baseline beside it where one
worker serves both sides (an A/A of one implementation). Where base and head each have a worker (Plan.side), this role
runs in both: the head's checked as below, the base's only built and timed, the timing served sample by sample to the
parent (evaluate.worker.sample_server), the other side never in this process.

It imports the baseline (and the reference, where the baseline is another implementation), records the
integrity snapshot and installs the guards before the candidate is imported, hides the harness, then runs
the correctness cases (evaluate.worker.correctness_cases) and the structural checks, times the candidate and the
baseline interleaved (evaluate.worker.shape_timing), then profiles them and the reference. Outputs leave through
the worker's sink (evaluate.worker.worker_io); the parent compares them with the reference's, so a candidate never
sees a reference output and cannot judge itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import torch

from kforge_bot.evaluate.worker import calls, importing, loading
from kforge_bot.evaluate.wire import checks, conditions, heldout
from kforge_bot.evaluate.worker.guards import AuditGuard, ThreadWatch, hooks_and_modes_left
from kforge_bot.evaluate.wire.plan import Fit, Plan
from kforge_bot.evaluate.worker.correctness_cases import CorrectnessCases
from kforge_bot.evaluate.worker.profile import count_flops, profile_call
from kforge_bot.evaluate.worker.snapshot import (CRITICAL, FunctionSnapshot, framework_state, hide_harness,
                                                 restore_framework_state, trusted_namespaces)
from kforge_bot.evaluate.worker.worker_io import (Channel, Stop, as_list, close_stdin, is_compile_error,
                                           keep_outputs_on_device, read_control_line, save, shared_receiver,
                                           short_error)
from kforge_bot.evaluate.worker.shape_timing import ShapeTiming
from kforge_bot.evaluate.wire.shipped import LISTED, form_context
from kforge_bot.evaluate.worker.inheritance import inherits_forward, inherits_recorded
from kforge_bot.evaluate.worker.shipped_inputs import ShippedInputs, fetcher
from kforge_bot.targets import make_target

_clock = time.monotonic  # bound before user code exists
T = TypeVar("T")


def run_candidate(plan: Plan, channel: Channel, workdir: Path, started: float, boot: dict[str, float]) -> None:
    """The candidate role, phase by phase; a Stop from any of them ends it with a verdict. In the base's own worker
    (plan.side "baseline") its kernel is this role's candidate, unchecked, and every failure is the base's."""
    if plan.side == "baseline":
        try:
            _run_phases(plan, channel, workdir, started, boot)
        except Stop as stop:
            raise Stop(stop.status if stop.status in ("crash", "timeout") else "crash",
                       f"the baseline's own worker: {stop.reason}", stop.detail, side="baseline") from None
        return
    _run_phases(plan, channel, workdir, started, boot)


def _run_phases(plan: Plan, channel: Channel, workdir: Path, started: float, boot: dict[str, float]) -> None:
    run = CandidateRun(plan, channel, workdir, started, boot)
    try:
        run.setup()
    except Stop:
        raise
    except Exception as exc:  # noqa: BLE001 - before the candidate exists, a failure is the baseline's
        raise Stop("crash", f"the baseline failed before the candidate was imported: {short_error(exc)}",
                   traceback.format_exc()[-4000:], side="baseline") from None
    run.build()
    if plan.side != "baseline":  # the base's outputs are not what is judged: its worker only times it
        run.correctness()
    # Timed before the profiler runs: a process the profiler has run in launches kernels with its hooks still in
    # place, and with base and head in workers of their own only one side's process would carry them. On an H100,
    # profiling first made even an A/A's head look busy 24 us longer after its samples, and honest candidates were
    # rejected for hidden work (benchmarks/results/busy_before_split_h100.md).
    timing = run.timing()
    profile = run.profile()
    run.report(profile, timing)


class CandidateRun:
    """One candidate's run in this worker: the guards the harness runs after every candidate call and phase
    (`guard`, `restore_state`, `no_reaching_in`, `no_threads_left`, `shared_unchanged`, `call`), and the
    phases in their order (`setup`, `build`, `correctness`, `profile`, `timing`, `report`)."""

    def __init__(self, plan: Plan, channel: Channel, workdir: Path, started: float, boot: dict[str, float]) -> None:
        self.plan = plan
        self.channel = channel
        self.workdir = workdir
        self.started = started  # the request's arrival: phases count from here
        self.boot = boot
        self.spec = plan.spec
        # Processes alive before any candidate code ran (none in a fresh worker; a test's own where the role runs in
        # its process): only those started since can be the candidate's helpers.
        self.preexisting = frozenset(conditions.others_alive())
        self.restored: list[str] = []
        self.phases: dict[str, Any] = {}
        self.first_calls: dict[str, float] = {}  # "candidate, shape set 0" -> seconds: build time (first_call)
        self.shared: list[tuple[str, torch.Tensor]] = []
        # Every output saved, by file name: its digest, or None where it was handed over as device memory. The
        # files lie in this worker's scratch, which the candidate's code can write: the bot compares a file only
        # if it is still what was saved, and a file saved here must still be there.
        self.saved: dict[str, str | None] = {}
        # Both sides as the harness calls them where the manifest says more than "call it" (calls.EntryCall).
        self._base_call: calls.EntryCall | None = None
        self._cand_call: calls.EntryCall | None = None
        self.output_slots: frozenset[int] = frozenset()  # inputs that are output buffers (Fit.output_slots)
        self.oracle: Callable[..., Any] | None = None  # the problem's own check_implementation, where it has one
        self.last_output: Any = None  # the last call's output as returned (the oracle takes it whole)
        # The head's worker with none of the base's files (Plan.ship_inputs): no baseline, no reference in it.
        self.shipped = plan.ship_inputs and plan.side == "candidate"
        self.baseline: Any = None
        self.base_module: Any = None
        self.base_obj: Any = None
        self.state_source: Any = None
        self.reference_for_profile: Any = None

    @property
    def base_fn(self) -> Any:
        return self._base_call if self._base_call is not None else self.baseline

    @property
    def cand_fn(self) -> Any:
        return self._cand_call if self._cand_call is not None else self.candidate

    # ------------------------------------------------------------------------------------------ guards

    def _baseline_extra(self) -> dict[str, Any]:
        # The functions behind the baseline: a patch of its class or instance would fake the comparison.
        baseline = self.baseline
        return {"baseline": baseline, "baseline class": type(baseline),
                "baseline.forward": getattr(type(baseline), "forward", None),
                "baseline instance forward": vars(baseline).get("forward") if hasattr(baseline, "__dict__") else None}

    def guard(self, phase: str, only: tuple[str, ...] | None = None) -> None:
        changed = self.snapshot.changed(self._baseline_extra(), only=only)
        if changed:
            raise Stop("rejected", f"the candidate replaced {', '.join(changed[:5])} ({phase}); patching the "
                                   "framework, the clock, the harness or the baseline is not allowed")
        left = hooks_and_modes_left()
        if left:
            raise Stop("rejected", f"the candidate left {', '.join(left[:3])} installed ({phase}); code it runs "
                                   "inside every module call or torch function would run inside the baseline's too")

    def restore_state(self) -> None:
        # Settings a candidate leaves behind (threads, TF32, ...) would slow or speed whatever runs next.
        for change in restore_framework_state(self.state):
            if change not in self.restored:
                self.restored.append(change)

    def no_reaching_in(self, what: str) -> None:
        if self.audit.refused:
            raise Stop("rejected", f"{what}: the candidate reached for {self.audit.refused[0]}; frames and the "
                                   "garbage collector expose the harness's state (refused)")

    def no_threads_left(self, what: str) -> None:
        self.no_reaching_in(what)
        running = self.threads.running()
        if running:
            raise Stop("rejected", f"{what}: the candidate left {len(running)} thread(s) running after the call "
                                   f"returned ({', '.join(running[:3])}); work finishing after a call returns "
                                   "escapes the timed region")

    def shared_unchanged(self, when: str) -> None:
        # The candidate can write into weights it now shares with the baseline: values it changed (denormals
        # that slow the baseline, say) would make the comparison about data, not code.
        for (name, now), (_, before) in zip(self.shared, self.shared_before):
            if not torch.equal(now, before):
                raise Stop("rejected", f"{when}: the candidate changed its {name!r} in place (parameters and "
                                       "buffers must stay as built; they are shared with the baseline)")

    def between_samples(self) -> None:
        """After every timed candidate sample: a patched clock or harness function is rejected before the next
        sample uses it."""
        self.no_threads_left("timed run")
        self.guard("while timing", CRITICAL + self.snapshot.held)
        self.restore_state()

    def save(self, outputs: list[Any], name: str) -> None:
        self.saved[name] = save(outputs, self.plan.out_dir / name)

    def first_call(self, side: str, shape: int | str, call: Callable[[], T]) -> T:
        """`call`, a side's call on a shape set (or a held-out variant's sizes: "held-out variant 1"). The first one
        may build (torch.compile, a lazy load_inline, a Triton JIT, an autotune sweep): the worker says so before and
        after, and the parent bounds it by the whole timeout, not by its no-progress limit
        (sandbox.WorkerProcess.run); `phases.first_call_s` keeps it."""
        key = f"{side}, shape set {shape}" if isinstance(shape, int) else f"{side}, {shape}"
        if key in self.first_calls:
            return call()
        self.channel.send("progress", phase="first_call", side=side, shape=shape)
        began = _clock()
        try:
            return call()
        finally:
            self.first_calls[key] = round(_clock() - began, 3)
            self.phases["first_call_s"] = dict(self.first_calls)
            self.channel.send("progress", phase="first_call_done", side=side, shape=shape)

    def lap(self, name: str) -> None:
        now = _clock()
        self.phases[name] = now - self.mark
        self.mark = now

    def call(self, fn: Callable[..., Any], inputs: list[Any], what: str) -> list[Any]:
        try:
            raw = loading.call(fn, inputs)
            out = as_list(raw)
            self.target.synchronize()
        except checks.CheckFailure as failure:  # the manifest's outputs or gradients not there (calls.EntryCall)
            self.no_reaching_in(what)
            raise Stop(failure.kind, f"{what}: {failure}") from None
        except Exception as exc:  # noqa: BLE001
            self.no_reaching_in(what)
            status = "compile_error" if is_compile_error(exc) else "crash"
            raise Stop(status, f"{what}: {short_error(exc)}", traceback.format_exc()[-4000:]) from None
        # Before any check runs: a patch that puts itself back once the harness calls it would be gone later,
        # and a thread still writing the output would finish while the harness looked elsewhere.
        self.no_threads_left(what)
        self.guard(what)
        self.restore_state()
        self.inputs_plain(inputs, what)
        self.last_output = raw
        return out

    @contextlib.contextmanager
    def sizes_of(self, variant: heldout.Variant) -> Iterator[None]:
        """A held-out variant's sizes in force: set on the trusted modules (KernelBench's globals), or, shipped, the
        variant's recorded inputs and constructor arguments asked for."""
        if not self.shipped:
            with heldout.module_globals([m for m in (self.inputs_module, self.base_module) if m is not None],
                                        variant):
                yield
            return
        self.inputs_module.context = form_context(variant)
        try:
            yield
        finally:
            self.inputs_module.context = LISTED

    def variant_weights(self) -> Any:
        """The reference's weights for the variant's sizes (inside sizes_of), where the reference is a module."""
        if self.shipped:
            return self.inputs_module.weights()
        weights = loading.build_callable(self.base_obj, self.spec, self.inputs_module, self.device,
                                         self.plan.init_seed)
        return weights if isinstance(weights, torch.nn.Module) else None

    def inputs_plain(self, inputs: list[Any], what: str) -> None:
        try:
            checks.check_inputs_plain(inputs)
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, f"{what}: {failure}") from None

    # ------------------------------------------------------------------------------------------ phases

    def setup(self) -> None:
        """Trusted work, before the candidate exists: the baseline and the reference built, the snapshot taken,
        the guards installed and the harness hidden."""
        plan, spec, workdir = self.plan, self.spec, self.workdir
        self.target = make_target(plan.target)
        device = self.device = self.target.device
        torch.zeros(1, device=device)  # initialise the device before the snapshot: lazy init is not a patch
        settle_figures = self.target.calibrate()  # before any candidate code exists: none can skew them
        if plan.side:  # the parent plans both sides' settles from the base's figures (evaluate.pair_driver)
            self.channel.send("progress", phase="calibrated", settle=settle_figures)
        if self.shipped:
            self._setup_shipped()
            return
        inputs_module = self.inputs_module = importing.import_implementation(spec.inputs_source, workdir, "inputs",
                                                                           spec.support)
        base_module = self.base_module = importing.import_implementation(plan.baseline, workdir, "baseline",
                                                                       spec.support)
        base_obj = self.base_obj = loading.lookup(base_module, plan.baseline.symbol, plan.baseline.filename)
        self.listed_init = loading.init_key(spec, inputs_module)  # a held-out variant's that differs is built again
        # The reference's weights are the ones every side gets. Where the baseline is the reference (KernelBench,
        # most manifests), the baseline built from the same seed is that instance: one model build, not two.
        baseline_is_reference = plan.baseline.to_dict() == spec.reference.to_dict()
        if baseline_is_reference:
            self.baseline = loading.build_callable(base_obj, spec, inputs_module, device, plan.init_seed)
            reference_instance = self.baseline
        else:
            ref_module = importing.import_implementation(spec.reference, workdir, "reference", spec.support)
            ref_obj = loading.lookup(ref_module, spec.reference.symbol, spec.reference.filename)
            reference_instance = loading.build_callable(ref_obj, spec, inputs_module, device, plan.init_seed)
        ref_call = reference_instance if baseline_is_reference else \
            calls.wrap(ref_obj, reference_instance, spec, own_oracle=spec.reference_returns == "outputs",
                       module=ref_module)
        if not baseline_is_reference:
            del ref_module
        self.state_source = reference_instance if isinstance(reference_instance, torch.nn.Module) else None
        if spec.oracle_symbol:  # its own import: nothing the baseline's module holds is shared with it
            oracle_module = importing.import_implementation(spec.inputs_source, workdir, "oracle", spec.support)
            self.oracle = loading.lookup(oracle_module, spec.oracle_symbol, spec.inputs_source.filename)
        if not baseline_is_reference:
            self.baseline = loading.build_callable(base_obj, spec, inputs_module, device, plan.init_seed,
                                                   state_from=self.state_source)
        # The reference is profiled here (its ops tell a fallback apart); where the baseline is the reference, the
        # baseline's profile is the reference's.
        profiled = plan.settings.profile and not baseline_is_reference
        self.reference_for_profile = ref_call if profiled else None
        del reference_instance, ref_call
        # The baseline's own code (its module, its helpers, its classes) is watched like the framework: patched, it
        # would slow the baseline rather than speed the candidate (GPU MODE's in-process bypasses).
        trusted = {"the baseline's module": base_module, "the inputs' module": inputs_module}
        if self.oracle is not None:
            trusted["the problem's check's module"] = oracle_module
        self._guards_up(trusted)

    def _setup_shipped(self) -> None:
        """The head's worker where the base's files stay out of it (Plan.ship_inputs): a stand-in inputs module
        whose answers the parent hands over as the reference recorded them, no baseline, no reference."""
        spec, workdir = self.spec, self.workdir
        self.inputs_module = ShippedInputs(spec.inputs_symbol, spec.init_symbol,
                                           fetcher(self._ask_parent, self.plan.out_dir, self.device,
                                                   shared_receiver()))
        trusted: dict[str, Any] = {"the inputs' module": self.inputs_module}
        if spec.oracle_symbol:  # the problem's check (GPU MODE's reference.py), never the kernel's file
            oracle_module = importing.import_implementation(spec.inputs_source, workdir, "oracle", spec.support)
            self.oracle = loading.lookup(oracle_module, spec.oracle_symbol, spec.inputs_source.filename)
            trusted["the problem's check's module"] = oracle_module
        self._guards_up(trusted)

    def _ask_parent(self, name: str) -> dict[str, Any]:
        """The parent's answer (evaluate.shipping.Stager) to putting the reference's recorded `name` into this
        worker's scratch."""
        self.channel.send("progress", phase="need_inputs", file=name)
        try:
            reply = json.loads(read_control_line())
        except ValueError:
            reply = None
        if not isinstance(reply, dict) or reply.get("op") != "staged" or reply.get("file") != name:
            raise Stop("rejected", "the harness's control line was unreadable (consumed by the candidate?)")
        return reply

    def _guards_up(self, trusted: dict[str, Any]) -> None:
        """The integrity snapshot over the framework and the trusted modules, the thread and audit guards, the
        harness hidden: the last of the trusted work, before the candidate is imported."""
        plan, spec, workdir = self.plan, self.spec, self.workdir
        roots = tuple(dict.fromkeys(str(Path(p).resolve()) + os.sep for p in (workdir, spec.root, plan.baseline.root)
                                    if p))
        self.snapshot = FunctionSnapshot(extra=self._baseline_extra(), holders=trusted_namespaces(trusted, roots))
        self.state = framework_state()
        self.threads = ThreadWatch(str(workdir / "candidate_"))
        self.threads.install()
        self.audit = AuditGuard(str(workdir / "candidate_"))
        self.audit.install()  # for good: an audit hook cannot be removed
        hide_harness()
        self.phases = {"setup_s": _clock() - self.started, "boot": dict(self.boot)}
        self.channel.send("progress", phase="baseline built")  # a death before this is the baseline's (judge)

    def build(self) -> None:
        """Import and build the candidate (failures here are compile errors), then wait for the reference's Fit.
        Shipped (Plan.ship_inputs), it is built after the Fit: its constructor's arguments and weights are the
        reference's, recorded in the reference's worker."""
        plan = self.plan
        self._built(self._import_candidate)
        if self.shipped:
            if plan.await_fit:
                self._await_fit()
            self.listed_init = loading.init_key(self.spec, self.inputs_module)
            self.state_source = self.inputs_module.weights()
        self._built(self._build_candidate)
        if inherits_forward(self.candidate, self.baseline) or (
                self.shipped and inherits_recorded(self.candidate, self.inputs_module.forward())):
            raise Stop("rejected", "the candidate inherits the baseline's forward unchanged (it does no work of its "
                                   "own)")
        # One placement for the weights both sides hold, so where they sit in memory cannot tilt the comparison.
        self.shared = loading.share_matching_state(self.candidate, self.baseline)
        # Both sides as the harness calls them: the manifest's selected outputs, in-place inputs and gradients.
        try:
            # A baseline that is the reference's own oracle (`check` times the kernel against it) returns its results;
            # in the base's own worker (plan.side "baseline") that baseline is this role's candidate.
            own_oracle = self.spec.reference_returns == "outputs"
            oracle = own_oracle and self.plan.baseline == self.spec.reference
            base_here = own_oracle and self.plan.side == "baseline" and self.plan.candidate == self.spec.reference
            if calls.uses_conventions(self.spec):
                if self.baseline is not None:
                    self._base_call = calls.EntryCall(self.base_obj, self.baseline, self.spec, own_oracle=oracle,
                                                      module=self.base_module)
                self._cand_call = calls.EntryCall(self.cand_obj, self.candidate, self.spec, own_oracle=base_here,
                                                  module=self.cand_module)
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, str(failure)) from None
        self.shared_before = [(name, t.detach().clone()) for name, t in self.shared]
        self.phases["import_s"] = _clock() - self.started - self.phases["setup_s"]
        self.channel.send("progress", phase="imported")  # from here on, the parent's no-progress limit applies
        if plan.await_fit and not self.shipped:
            self._await_fit()
        self.mark = _clock()

    def _import_candidate(self) -> None:
        plan = self.plan
        self.cand_module = importing.import_implementation(plan.candidate, self.workdir, "candidate", self.spec.support)
        self.cand_obj = loading.lookup(self.cand_module, plan.candidate.symbol, plan.candidate.filename)

    def _build_candidate(self) -> None:
        self.candidate = loading.build_callable(self.cand_obj, self.spec, self.inputs_module, self.device,
                                                self.plan.init_seed, state_from=self.state_source)

    def _built(self, step: Callable[[], None]) -> None:
        """An import or build step of the candidate's: any failure is its compile error; the guards after."""
        try:
            step()
        except Stop:
            raise  # the harness's own verdict (a shipped file refused, or the base's that cannot travel)
        except Exception as exc:  # noqa: BLE001 - any failure to build is the candidate's
            self.no_reaching_in("while importing")  # a refused frame or gc access surfaces as an exception here
            raise Stop("compile_error", short_error(exc), traceback.format_exc()[-4000:]) from None
        self.no_threads_left("while importing")
        self.guard("while importing")
        self.restore_state()

    def _await_fit(self) -> None:
        # Built while the reference ran; the reference's sizes decide how many seeds and timed sets stay. Only
        # counts travel here (the seeds came before any user code ran), and the parent holds its own copy.
        waited = _clock()
        try:
            fit = Fit.from_dict(json.loads(read_control_line()))
            self.plan = self.plan.fitted(fit)
            self.output_slots = frozenset(fit.output_slots)
            keep_outputs_on_device(fit.device_outputs)
        except ValueError:
            raise Stop("rejected", "the harness's control line was unreadable (consumed by the candidate?)") from None
        if not self.plan.side:
            close_stdin()  # a side's worker keeps it: the parent's timing requests come that way
        self.phases["waited_for_reference_s"] = _clock() - waited

    def correctness(self) -> None:
        """Every shape set, every seed; inputs must stay unchanged; outputs plain and fresh (CorrectnessCases)."""
        cases = CorrectnessCases(self)
        for case in self.plan.correctness_cases():
            cases.listed(case)
        for case in self.plan.heldout_cases():
            cases.heldout(case)
        self.guard("while running")
        self.shared_unchanged("after the correctness calls")
        self.lap("correctness_s")

    def profile(self) -> dict[str, Any]:
        """The framework profiler's view of the candidate, the baseline and the reference on shape set 0, and the
        reference's FLOPs on every shape set; a profiler failure is reported, not held against the candidate."""
        profile: dict[str, Any] = {}
        if not self.plan.settings.profile:
            return profile
        plan, spec, device, target = self.plan, self.spec, self.device, self.target
        candidate = self.cand_fn
        try:
            inputs = loading.make_inputs(spec, self.inputs_module, spec.shape_sets[0], plan.timing_seed(0, 0), device)
            profile["candidate"] = profile_call(lambda: loading.call(candidate, inputs), device, target.synchronize)
            self.guard("while profiling")
            self.restore_state()
            if self.baseline is not None:  # shipped, the base's worker profiles both (side_workers merges them)
                self._profile_references(profile, inputs)
        except Exception as exc:  # noqa: BLE001 - a profiler failure is not the candidate's fault
            profile["error"] = short_error(exc)
        self.reference_for_profile = None  # profiled: this run holds it no longer
        self.guard("while profiling")
        self.restore_state()
        self.lap("profile_s")
        return profile

    def _profile_references(self, profile: dict[str, Any], inputs: list[Any]) -> None:
        plan, spec, device, target = self.plan, self.spec, self.device, self.target
        baseline, reference_for_profile = self.base_fn, self.reference_for_profile
        profile["baseline"] = self.first_call("baseline", 0, lambda: profile_call(
            lambda: loading.call(baseline, inputs), device, target.synchronize))
        reference = baseline if reference_for_profile is None else reference_for_profile
        profile["reference"] = profile["baseline"] if reference_for_profile is None else \
            profile_call(lambda: loading.call(reference, inputs), device, target.synchronize)
        # The reference's FLOPs on every shape set, for the roofline (None where the framework counts none).
        flops = []
        for s, shape in enumerate(spec.shape_sets):
            flops.append(self._flops(reference, inputs if s == 0 else loading.make_inputs(
                spec, self.inputs_module, shape, plan.timing_seed(s, 0), device)))
        profile["reference_flops"] = flops

    def _flops(self, reference: Any, inputs: list[Any]) -> int | None:
        flops = count_flops(lambda: loading.call(reference, inputs))
        self.target.synchronize()
        return flops

    def timing(self) -> list[dict[str, Any]]:
        """Each shape set timed (baseline and candidate interleaved), then checked (ShapeTiming)."""
        timing: list[dict[str, Any]] = []
        if self.plan.settings.measure:
            for shape_index in self.spec.timed_indices():
                timing.append(ShapeTiming(self, shape_index).time_and_check())
                self.guard("while timing")
            self.shared_unchanged("after timing")
            self.lap("timing_s")
        return timing

    def report(self, profile: dict[str, Any], timing: list[dict[str, Any]]) -> None:
        self.channel.send("result", status="ok", profile=profile, timing=timing, device_name=self.target.device_name(),
                          target_info=self.target.describe(), restored_state=self.restored, phases=self.phases,
                          shared_state=[name for name, _ in self.shared], saved=self.saved)
