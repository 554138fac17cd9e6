"""The worker's candidate role (kforge_bot.evaluate.worker): the candidate beside the baseline, in one process.

It imports the baseline (and the reference, where the baseline is another implementation), records the
integrity snapshot and installs the guards before the candidate is imported, hides the harness, then runs
the correctness cases and the structural checks, profiles the candidate, the baseline and the reference, and
times the first two interleaved. Outputs leave through the worker's sink (evaluate.worker_io); the parent
compares them with the reference's, so a candidate never sees a reference output and cannot judge itself.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch

from kforge_bot.evaluate import checks, loading
from kforge_bot.evaluate.guards import AuditGuard, ThreadWatch, hooks_and_modes_left
from kforge_bot.evaluate.plan import Case, Fit, Plan
from kforge_bot.evaluate.profile import count_flops, profile_call
from kforge_bot.evaluate.snapshot import (CRITICAL, FunctionSnapshot, framework_state, hide_harness, trusted_namespaces,
                                          restore_framework_state)
from kforge_bot.evaluate.graphs import GraphReplays
from kforge_bot.evaluate.timing import PairedTimes, a_sample_holding, measure_pair
from kforge_bot.evaluate.worker_io import (Channel, Stop, as_list, close_stdin, is_compile_error,
                                           keep_outputs_on_device, read_control_line, save, short_error)
from kforge_bot.targets import make_target

_clock = time.monotonic  # bound before user code exists


def run_candidate(plan: Plan, channel: Channel, workdir: Path, started: float, boot: dict[str, float]) -> None:
    """The candidate role, phase by phase; a Stop from any of them ends it with a verdict."""
    run = CandidateRun(plan, channel, workdir, started, boot)
    try:
        run.setup()
    except Stop:
        raise
    except Exception as exc:  # noqa: BLE001 - before the candidate exists, a failure is the baseline's
        raise Stop("crash", f"the baseline failed before the candidate was imported: {short_error(exc)}",
                   traceback.format_exc()[-4000:], side="baseline") from None
    run.build()
    run.correctness()
    profile = run.profile()
    timing = run.timing()
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
        self.restored: list[str] = []
        self.phases: dict[str, Any] = {}
        self.shared: list[tuple[str, torch.Tensor]] = []
        # Every output saved, by file name: its digest, or None where it was handed over as device memory. The
        # files lie in this worker's scratch, which the candidate's code can write: the bot compares a file only
        # if it is still what was saved, and a file saved here must still be there.
        self.saved: dict[str, str | None] = {}
        self.output_slots: frozenset[int] = frozenset()  # inputs that are output buffers (Fit.output_slots)
        self.oracle: Callable[..., Any] | None = None  # the problem's own check_implementation, where it has one
        self.last_output: Any = None  # the last call's output as returned (the oracle takes it whole)

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

    def lap(self, name: str) -> None:
        now = _clock()
        self.phases[name] = now - self.mark
        self.mark = now

    def call(self, fn: Callable[..., Any], inputs: list[Any], what: str) -> list[Any]:
        try:
            raw = loading.call(fn, inputs)
            out = as_list(raw)
            self.target.synchronize()
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
        inputs_module = self.inputs_module = loading.import_implementation(spec.inputs_source, workdir, "inputs",
                                                                           spec.support)
        base_module = loading.import_implementation(plan.baseline, workdir, "baseline", spec.support)
        base_obj = loading.lookup(base_module, plan.baseline.symbol, plan.baseline.filename)
        # The reference's weights are the ones every side gets. Where the baseline is the reference (KernelBench,
        # most manifests), the baseline built from the same seed is that instance: one model build, not two.
        baseline_is_reference = plan.baseline.to_dict() == spec.reference.to_dict()
        if baseline_is_reference:
            self.baseline = loading.build_callable(base_obj, spec, inputs_module, device, plan.init_seed)
            reference_instance = self.baseline
        else:
            ref_module = loading.import_implementation(spec.reference, workdir, "reference", spec.support)
            ref_obj = loading.lookup(ref_module, spec.reference.symbol, spec.reference.filename)
            reference_instance = loading.build_callable(ref_obj, spec, inputs_module, device, plan.init_seed)
            del ref_module
        self.state_source = reference_instance if isinstance(reference_instance, torch.nn.Module) else None
        if spec.oracle_symbol:  # its own import: nothing the baseline's module holds is shared with it
            oracle_module = loading.import_implementation(spec.inputs_source, workdir, "oracle", spec.support)
            self.oracle = loading.lookup(oracle_module, spec.oracle_symbol, spec.inputs_source.filename)
        if not baseline_is_reference:
            self.baseline = loading.build_callable(base_obj, spec, inputs_module, device, plan.init_seed,
                                                   state_from=self.state_source)
        # The reference is profiled here (its ops tell a fallback apart); where the baseline is the reference, the
        # baseline's profile is the reference's.
        profiled = plan.settings.profile and not baseline_is_reference
        self.reference_for_profile = reference_instance if profiled else None
        del reference_instance
        # The baseline's own code (its module, its helpers, its classes) is watched like the framework: patched, it
        # would slow the baseline rather than speed the candidate (GPU MODE's in-process bypasses).
        trusted = {"the baseline's module": base_module, "the inputs' module": inputs_module}
        if self.oracle is not None:
            trusted["the problem's check's module"] = oracle_module
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
        """Import and build the candidate (failures here are compile errors), then wait for the reference's Fit."""
        plan = self.plan
        try:
            cand_module = loading.import_implementation(plan.candidate, self.workdir, "candidate", self.spec.support)
            cand_obj = loading.lookup(cand_module, plan.candidate.symbol, plan.candidate.filename)
            self.candidate = loading.build_callable(cand_obj, self.spec, self.inputs_module, self.device,
                                                    plan.init_seed, state_from=self.state_source)
        except Exception as exc:  # noqa: BLE001 - any failure to build is the candidate's
            self.no_reaching_in("while importing")  # a refused frame or gc access surfaces as an exception here
            raise Stop("compile_error", short_error(exc), traceback.format_exc()[-4000:]) from None
        self.no_threads_left("while importing")
        self.guard("while importing")
        self.restore_state()
        if _inherits_forward(self.candidate, self.baseline):
            raise Stop("rejected", "the candidate inherits the baseline's forward unchanged (it does no work of its "
                                   "own)")
        # One placement for the weights both sides hold, so where they sit in memory cannot tilt the comparison.
        self.shared = loading.share_matching_state(self.candidate, self.baseline)
        self.shared_before = [(name, t.detach().clone()) for name, t in self.shared]
        self.phases["import_s"] = _clock() - self.started - self.phases["setup_s"]
        self.channel.send("progress", phase="imported")  # from here on, the parent's no-progress limit applies
        if plan.await_fit:
            self._await_fit()
        self.mark = _clock()

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
        close_stdin()
        self.phases["waited_for_reference_s"] = _clock() - waited

    def correctness(self) -> None:
        """Every shape set, every seed; inputs must stay unchanged; outputs plain and fresh."""
        for case in self.plan.correctness_cases():
            self._correctness_case(case)
        self.guard("while running")
        self.shared_unchanged("after the correctness calls")
        self.lap("correctness_s")

    def _correctness_case(self, case: Case) -> None:
        spec, device_type = self.spec, self.device.type
        inputs = loading.make_inputs(spec, self.inputs_module, spec.shape_sets[case.shape], case.seed, self.device)
        before = checks.snapshot_inputs(inputs)
        outputs = self.call(self.candidate, inputs, f"running {case.label}")
        returned = self.last_output
        try:
            checks.check_plain_outputs(outputs, device_type)
            checks.check_no_alias(outputs, inputs, self.output_slots)
            checks.check_inputs_unchanged(inputs, before, skip=self.output_slots)
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, f"{case.label}: {failure}") from None
        self.save(outputs, case.cand_file)
        if self.oracle is not None:
            self._problem_oracle(case, inputs, before, returned)
        if case.reuse_file:
            self._same_buffers_again(case, inputs, outputs)
        self.channel.send("progress", phase="correctness", case=case.label)

    def _problem_oracle(self, case: Case, inputs: list[Any], before: list[Any], returned: Any) -> None:
        """The problem's own check (GPU MODE's check_implementation(data, output)), beside the bot's comparison,
        never instead of it: on copies of the inputs as they were before the call (the reference it runs may write
        an output buffer) and of the output, after the output was saved for the bot."""
        from torch.utils import _pytree

        data = loading.DataInputs([t.clone() if isinstance(t, torch.Tensor) else t for t in before],
                                  inputs.structure).data() if isinstance(inputs, loading.DataInputs) else before
        output = _pytree.tree_map(lambda t: torch.Tensor.clone(t) if type(t) is torch.Tensor else t,  # noqa: E721
                                  returned)
        try:
            verdict = self.oracle(data, output)  # type: ignore[misc]
            self.target.synchronize()
        except Exception as exc:  # noqa: BLE001 - the check failing on this output is a failed check
            raise Stop("incorrect", f"{case.label}: the problem's {self.spec.oracle_symbol} raised "
                                    f"{short_error(exc)}") from None
        self.guard("in the problem's check")
        self.restore_state()
        good, message = _oracle_verdict(verdict)
        if not good:
            raise Stop("incorrect", f"{case.label}: the problem's {self.spec.oracle_symbol} failed: "
                                    f"{message[:500] or 'no reason given'}")

    def _same_buffers_again(self, case: Case, inputs: list[Any], outputs: list[Any]) -> None:
        # Same input buffers, new values: a result cached by pointer or shape shows up here, and an
        # output buffer reused across calls overwrites the first result.
        spec = self.spec
        kept = [o.clone() for o in outputs]
        fresh = loading.make_inputs(spec, self.inputs_module, spec.shape_sets[case.shape], case.reuse_seed, self.device)
        _fill(inputs, fresh)
        again = self.call(self.candidate, inputs, f"running {case.label} again with new values in the same buffers")
        try:
            checks.check_plain_outputs(again, self.device.type)
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, f"{case.label}: {failure}") from None
        self.save(again, case.reuse_file)
        for i, (first, copy) in enumerate(zip(outputs, kept)):
            if checks.aliases_any(first, inputs, self.output_slots):
                continue  # the output buffer the harness hands every call: written again by design
            if not torch.equal(first.nan_to_num(), copy.nan_to_num()):
                raise Stop("rejected", f"{case.label}: output {i} of an earlier call changed when the "
                                       "candidate ran again (output buffers reused across calls)")

    def profile(self) -> dict[str, Any]:
        """The framework profiler's view of the candidate, the baseline and the reference on shape set 0, and the
        reference's FLOPs on every shape set; a profiler failure is reported, not held against the candidate."""
        profile: dict[str, Any] = {}
        if not self.plan.settings.profile:
            return profile
        plan, spec, device, target = self.plan, self.spec, self.device, self.target
        candidate, baseline, reference_for_profile = self.candidate, self.baseline, self.reference_for_profile
        inputs = loading.make_inputs(spec, self.inputs_module, spec.shape_sets[0], plan.timing_seed(0, 0), device)
        try:
            profile["candidate"] = profile_call(lambda: loading.call(candidate, inputs), device, target.synchronize)
            self.guard("while profiling")
            self.restore_state()
            profile["baseline"] = profile_call(lambda: loading.call(baseline, inputs), device, target.synchronize)
            reference = baseline if reference_for_profile is None else reference_for_profile
            profile["reference"] = profile["baseline"] if reference_for_profile is None else \
                profile_call(lambda: loading.call(reference, inputs), device, target.synchronize)
            # The reference's FLOPs on every shape set, for the roofline (None where the framework counts none).
            flops = []
            for s, shape in enumerate(spec.shape_sets):
                flops.append(self._flops(reference, inputs if s == 0 else loading.make_inputs(
                    spec, self.inputs_module, shape, plan.timing_seed(s, 0), device)))
            profile["reference_flops"] = flops
        except Exception as exc:  # noqa: BLE001 - a profiler failure is not the candidate's fault
            profile["error"] = short_error(exc)
        self.reference_for_profile = None  # profiled: this run holds it no longer
        self.guard("while profiling")
        self.restore_state()
        self.lap("profile_s")
        return profile

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


class ShapeTiming:
    """One shape set timed: its rotated input sets, the callbacks measure_pair runs between timed calls, and
    the checks after timing (inputs unchanged, elements changed, values moved between buffers)."""

    def __init__(self, run: CandidateRun, shape_index: int) -> None:
        plan, spec = run.plan, run.spec
        self.run = run
        self.plan = plan
        self.shape = shape_index
        self.baseline = run.baseline
        self.candidate = run.candidate
        self.device_type = run.device.type
        self.sets = [loading.make_inputs(spec, run.inputs_module, spec.shape_sets[shape_index],
                                         plan.timing_seed(shape_index, r), run.device)
                     for r in range(plan.settings.rotate_sets)]
        self.snapshots = [checks.snapshot_inputs(s) for s in self.sets]
        self.kept: dict[int, list[torch.Tensor]] = {}
        self.last_beat = _clock()
        self.replays: GraphReplays | None = None  # the candidate's graphs, where timing replayed them
        self.calls_per_sample = 1
        self.baseline_failure: BaseException | None = None

    def time_and_check(self) -> dict[str, Any]:
        times = self.measure()
        # Where the candidate was timed from CUDA graphs, the checks after timing replay those graphs (their
        # outputs poisoned first): a graph can hold other work than the eager call (a capture-only cache, say),
        # and the code that was timed is the code these checks are for.
        self.replays = times.timed_candidate
        self.calls_per_sample = times.calls_per_sample
        times.timed_candidate = None
        self.check_inputs_and_save()
        self.change_one_element()
        self.move_values()
        self.replays = None  # the graphs' memory goes with them
        return {"shape": self.shape, **times.to_dict()}

    # ------------------------------------------------- measure_pair's callbacks (between timed calls: CRITICAL)

    def call_baseline(self, inputs: list[Any]) -> Any:
        try:
            return loading.call(self.baseline, inputs)
        except Exception as exc:
            self.baseline_failure = exc  # the baseline's own call failed: charged to the baseline (`measure`)
            raise

    def call_candidate(self, inputs: list[Any]) -> Any:
        return loading.call(self.candidate, inputs)

    def after_baseline(self, out: Any, index: int) -> None:
        # The same untimed work as the candidate's side (a copy made, the output poisoned), so the two sides
        # reach each sample after the same memory traffic: an A/A run must read 1.0. The copy is not kept.
        outputs = as_list(out)
        copies = [torch.Tensor.clone(o) for o in outputs if isinstance(o, torch.Tensor)]
        checks.poison_outputs(copies)  # freed next: memory the candidate's next output may be given must not hold this answer
        del copies
        checks.poison_outputs(outputs)

    def after_candidate_sample(self) -> None:
        self.run.between_samples()  # patched clock or harness function: rejected before the next sample uses it
        for inputs in self.sets:  # a method set on a timed input would tell the candidate when it is refilled
            checks.check_inputs_plain(inputs)

    def after_candidate(self, out: Any, index: int) -> None:
        outputs = as_list(out)
        checks.check_plain_outputs(outputs, self.device_type)
        self.kept[index] = [o.clone() for o in outputs]
        # Replayed graphs write the same static outputs every time: poisoned, an unwritten one shows as NaN.
        checks.poison_outputs(outputs)

    def progress(self, pairs: int, speedup: float | None, ci: tuple[float, float] | None) -> None:
        self.run.channel.send("progress", phase="timing", shape=self.shape, pairs=pairs, speedup=speedup,
                              ci=list(ci) if ci else None)

    def heartbeat(self, pairs: int) -> None:
        if _clock() - self.last_beat >= 1.0:  # at most one message a second
            self.last_beat = _clock()
            self.run.channel.send("progress", phase="timing", shape=self.shape, pairs=pairs)

    # ------------------------------------------------------------------------------------------ timing

    def measure(self) -> PairedTimes:
        settings, shape_sets = self.plan.settings, self.plan.spec.timed_indices()
        try:
            times = measure_pair(
                self.run.target, self.call_baseline, self.call_candidate, self.sets,
                time_budget_s=settings.time_budget_s / len(shape_sets),
                target_precision=settings.target_precision,
                min_pairs=settings.min_pairs,
                max_pairs=settings.max_pairs,
                confidence=settings.confidence,
                warmup_ms=settings.warmup_ms,
                after_baseline=self.after_baseline,
                after_candidate=self.after_candidate,
                progress=self.progress,
                heartbeat=self.heartbeat,
                tolerance=self.plan.spec.tolerance,
                after_candidate_sample=self.after_candidate_sample,
            )
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, f"timed run, shape set {self.shape}: {failure}") from None
        except Stop:
            raise  # a guard's verdict (a patch, a thread left running), not a crash
        except Exception as exc:  # noqa: BLE001
            side = "baseline" if exc is self.baseline_failure else "candidate"
            who = "the baseline's call: " if side == "baseline" else ""
            raise Stop("crash", f"timed run, shape set {self.shape}: {who}{short_error(exc)}",
                       traceback.format_exc()[-4000:], side=side) from None
        if len(shape_sets) > 1 and times.stop_reason.startswith("time budget"):
            # "1.5 s" beside a 3 s --time-budget reads as a mistake unless it says it is this shape set's share.
            times.stop_reason += f" (this shape set's share of {settings.time_budget_s:g} s)"
        return times

    # ----------------------------------------------------------------------------------- after timing

    def check_inputs_and_save(self) -> None:
        """Each timed set's inputs as they were; the candidate's last output on each set saved for comparison."""
        # The whole snapshot before anything is saved: between timed calls only the critical part is checked,
        # and a save through a patched function (socket's, say) could swap in an answer computed only now.
        self.run.guard("while timing")
        for r, (inputs, before) in enumerate(zip(self.sets, self.snapshots)):
            try:
                checks.check_inputs_unchanged(inputs, before, skip=self.run.output_slots)
            except checks.CheckFailure as failure:
                raise Stop("rejected", f"timed run, shape set {self.shape}: {failure}") from None
            if r in self.kept:
                self.run.save(self.kept[r], self.plan.timed_cand_file(self.shape, r))

    def change_one_element(self) -> None:
        # The timed sets repeat, so a result cached by buffer or by (a sample of) the input's values looks fast.
        # Each set, in its own buffers, with elements changed (which ones follow from the set's secret seed)
        # must change the answer; the element is put back afterwards.
        for r, changed in enumerate(c for c in self.plan.changed_cases() if c.shape == self.shape):
            undo: list[Any] = []
            checks.perturb_elements(self.sets[r], changed.seed, undo, skip=self.run.output_slots)
            self._call_and_save(r, changed.label, changed.cand_file)
            checks.undo_perturbation(undo)

    def move_values(self) -> None:
        # Then move each set's values into the next set's buffers and call once more: a result cached by pointer
        # (switched on only after the correctness calls) now answers with the old values' result.
        sets = self.sets
        if len(sets) > 1:
            values = [[v.clone() if isinstance(v, torch.Tensor) else v for v in s] for s in sets]
            for r, buffers in enumerate(sets):
                _fill(buffers, values[(r + 1) % len(sets)])
            del values  # device memory: large inputs leave little room for more copies
            for r in range(len(sets)):
                self._call_and_save(r, f"input set {(r + 1) % len(sets)}'s values in input set {r}'s buffers",
                                    self.plan.moved_cand_file(self.shape, r))

    def _call_and_save(self, r: int, what: str, file: str) -> None:
        """The candidate on timed input set `r`'s buffers (as they are now), its outputs checked and saved."""
        buffers = self.sets[r]
        fn: Callable[..., Any] = self.candidate
        replays = self.replays
        if replays is not None:
            def fn(*_: Any) -> Any:
                # As a timed sample ran it: every output poisoned, the device settled, then the sets' graphs in
                # an order timing used, the one checked as late as it ever came (a graph that could tell a check
                # from a timed sample by the outputs of the graphs before it is checked as timed; a kernel that
                # times its own memory or the clock can still tell them apart: README's honest limits).
                replays.poison_outputs()
                self.run.target.settle()  # after the poison, as in timing: the outputs' lines flushed alike
                order = a_sample_holding(r, self.calls_per_sample, len(self.sets))
                for j in order:
                    replays(self.sets[j])
                return replays.output(buffers)
        outputs = self.run.call(fn, buffers, f"timed run, shape set {self.shape}: {what}")
        try:
            checks.check_plain_outputs(outputs, self.device_type)
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, f"timed run, shape set {self.shape}: {failure}") from None
        self.run.save(outputs, file)


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


def _oracle_verdict(verdict: Any) -> tuple[bool, str]:
    """A check's answer as GPU MODE's problems give it: (good, message), a bare bool, or a list of reasons (empty:
    good) or a message (empty: good)."""
    if isinstance(verdict, tuple) and len(verdict) == 2 and isinstance(verdict[0], bool):
        return verdict[0], str(verdict[1])
    if isinstance(verdict, bool):
        return verdict, ""
    if isinstance(verdict, (list, str)):
        return not verdict, " ".join(map(str, verdict)) if isinstance(verdict, list) else verdict
    return False, f"returned {type(verdict).__name__}, not (bool, message)"


def _fill(buffers: list[Any], values: list[Any]) -> None:
    """Write `values` into the tensors of `buffers` in place (same pointers, new contents)."""
    for buffer, value in zip(buffers, values):
        if isinstance(buffer, torch.Tensor):
            buffer.copy_(value)
