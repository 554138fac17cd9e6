"""One shape set timed in the candidate role (kforge_bot.evaluate.worker.candidate_role): its rotated input sets, the
callbacks measure_pair runs between timed calls, and the checks after timing. Where base and head each have a
worker, the parent drives the pairs and this serves one side's samples (evaluate.worker.sample_server)."""

from __future__ import annotations

import time
import traceback
from typing import Any, Callable

import torch

from kforge_bot.evaluate.worker import calls, loading
from kforge_bot.evaluate.wire import checks, conditions, heldout
from kforge_bot.evaluate.wire.graphs import GraphReplays
from kforge_bot.evaluate.worker.sample_server import SideTimer, serve
from kforge_bot.evaluate.wire.paired_times import PairedTimes
from kforge_bot.evaluate.wire.timing import a_sample_holding, measure_pair
from kforge_bot.evaluate.worker.worker_io import Stop, as_list, short_error
_clock = time.monotonic  # bound before user code exists


class ShapeTiming:
    """One shape set timed: its rotated input sets, the callbacks measure_pair runs between timed calls, and
    the checks after timing (inputs unchanged, elements changed, values moved between buffers)."""

    def __init__(self, run: Any, shape_index: int) -> None:
        # `run`: the candidate role's CandidateRun (its guards, calls and channel); not imported here, which
        # would tie the two modules in a circle.
        plan, spec = run.plan, run.spec
        self.run = run
        self.plan = plan
        self.shape = shape_index
        # In a side's own worker (plan.side) the other side is another process: `baseline` here is the reference
        # the weights came from, never timed or called.
        self.baseline = None if plan.side else run.base_fn
        self.candidate = run.cand_fn
        self.device_type = run.device.type
        self.sets = [loading.make_inputs(spec, run.inputs_module, spec.shape_sets[shape_index],
                                         plan.timing_seed(shape_index, r), run.device)
                     for r in range(plan.settings.rotate_sets)]
        self.snapshots = [checks.snapshot_inputs(s) for s in self.sets]
        # The manifest's conventions (calls.EntryCall): each set's upstream gradients come from its seed, in-place
        # inputs are put back between samples, and a backward is timed by direction too.
        self.entries = [f for f in (self.baseline, self.candidate) if isinstance(f, calls.EntryCall)]
        for r, inputs in enumerate(self.sets):
            for entry in self.entries:
                entry.bind(inputs, plan.timing_seed(shape_index, r))
        self.inplace = self.candidate.written if isinstance(self.candidate, calls.EntryCall) else []
        self.backward = bool(self.entries and self.entries[0].grads)
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
        if self.plan.side != "baseline":  # the base's worker times the base; its outputs are not judged
            self.check_inputs_and_save()
            self.change_one_element()
            self.move_values()
        self.replays = None  # the graphs' memory goes with them
        timed = {"shape": self.shape, **times.to_dict()}
        if self.backward:  # the one above is forward+backward: every output check was made on it
            timed["directions"] = self.directions()
        return timed

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
        self.no_helper_processes(f"timed run, shape set {self.shape}")
        for inputs in self.sets:  # a method set on a timed input would tell the candidate when it is refilled
            checks.check_inputs_plain(inputs)

    def after_candidate(self, out: Any, index: int) -> None:
        outputs = as_list(out)
        checks.check_plain_outputs(outputs, self.device_type)
        self.kept[index] = [o.clone() for o in outputs]
        # Replayed graphs write the same static outputs every time: poisoned, an unwritten one shows as NaN.
        checks.poison_outputs(outputs)

    def fresh_inputs(self, sets: list[int]) -> None:
        """Before a timed sample, outside the timed region: the sets it calls get new tensors (new objects, new
        storage, version counters at zero) holding the same values, so a kernel that memoizes by tensor object,
        version or pointer computes on every timed call as it did in the checks. Made before the old ones are
        freed, so no new tensor is given the storage it replaces."""
        for r in sets:
            inputs = self.sets[r]
            old = list(inputs)
            for i, value in enumerate(old):
                if type(value) is torch.Tensor:
                    copy = torch.Tensor.clone(torch.Tensor.detach(value))
                    inputs[i] = copy.requires_grad_() if value.requires_grad else copy
            for entry in self.entries:
                entry.moved(old, inputs)
            del old

    def no_helper_processes(self, when: str) -> None:
        """No process but this worker may be alive while a timed sample runs: a helper busy only while the
        baseline runs would slow it and make the candidate look fast (conditions.others_alive)."""
        others = [p for p in conditions.others_alive() if p not in self.run.preexisting]
        if others:
            raise Stop("rejected", f"{when}: {len(others)} process(es) besides the worker were alive while timed "
                                   f"samples ran ({', '.join(others[:3])}); a kernel's work must stay in its calls, "
                                   "and processes beside the timed samples could slow one side")

    def restore_inplace(self, side: str) -> None:
        """Between samples, outside the timed region: in-place inputs back as they were made."""
        for inputs, before in zip(self.sets, self.snapshots):
            for i in self.inplace:
                inputs[i].copy_(before[i])

    def progress(self, pairs: int, speedup: float | None, ci: tuple[float, float] | None) -> None:
        self.run.channel.send("progress", phase="timing", shape=self.shape, pairs=pairs, speedup=speedup,
                              ci=list(ci) if ci else None)

    def heartbeat(self, pairs: int) -> None:
        if _clock() - self.last_beat >= 1.0:  # at most one message a second
            self.last_beat = _clock()
            self.run.channel.send("progress", phase="timing", shape=self.shape, pairs=pairs)

    # ------------------------------------------------------------------------------------------ timing

    def measure(self, baseline: Callable[[list[Any]], Any] | None = None,
                candidate: Callable[[list[Any]], Any] | None = None,
                refresh: Callable[[str], None] | None = None, direction: str = "") -> PairedTimes:
        """Baseline and candidate interleaved on this shape set's timed sets: their whole calls, or (a backward's
        `directions`) one direction of them, whose outputs are checked but not kept."""
        settings, shape_sets = self.plan.settings, self.plan.spec.timed_indices()
        if refresh is None and self.inplace:
            refresh = self.restore_inplace
        for entry in self.entries:
            entry.copy_inplace = False  # the in-place results are the buffers (kept or checked, then put back)
        try:
            if self.plan.side:
                return self.serve(candidate or self.call_candidate, refresh, direction)
            self.first_baseline_call()
            self.no_helper_processes(f"before timing shape set {self.shape}")
            times = measure_pair(
                self.run.target, baseline or self.call_baseline, candidate or self.call_candidate, self.sets,
                timing_budget_s=settings.timing_budget_s / len(shape_sets),
                target_precision=settings.target_precision,
                min_pairs=settings.min_pairs,
                max_pairs=settings.max_pairs,
                confidence=settings.confidence,
                warmup_ms=settings.warmup_ms,
                after_baseline=self.after_baseline,
                after_candidate=self.after_direction if direction else self.after_candidate,
                progress=self.progress,
                heartbeat=self.heartbeat,
                tolerance=self.plan.spec.tolerance,
                after_candidate_sample=self.after_candidate_sample,
                refresh=refresh,
                fresh_inputs=None if direction else self.fresh_inputs,
            )
        except checks.CheckFailure as failure:
            what = f", {direction}" if direction else ""
            raise Stop(failure.kind, f"timed run, shape set {self.shape}{what}: {failure}") from None
        except Stop:
            raise  # a guard's verdict (a patch, a thread left running), not a crash
        except Exception as exc:  # noqa: BLE001
            side = "baseline" if exc is self.baseline_failure else "candidate"
            who = "the baseline's call: " if side == "baseline" else ""
            raise Stop("crash", f"timed run, shape set {self.shape}: {who}{short_error(exc)}",
                       traceback.format_exc()[-4000:], side=side) from None
        finally:
            for entry in self.entries:
                entry.copy_inplace = True
        if len(shape_sets) > 1 and times.stop_reason.startswith("time budget"):
            # "1.5 s" beside a 3 s --timing-budget reads as a mistake unless it says it is this shape set's share.
            times.stop_reason += f" (this shape set's share of {settings.timing_budget_s:g} s)"
        return times

    def serve(self, candidate: Callable[[list[Any]], Any], refresh: Callable[[str], None] | None,
              direction: str) -> PairedTimes:
        """This worker's own side of the pair, timed one sample at a time at the parent's request
        (evaluate.worker.sample_server), with the callbacks measure_pair would run on it; the figures are the
        parent's."""
        if not direction:
            self.first_own_call()
        self.no_helper_processes(f"before timing shape set {self.shape}")
        timer = SideTimer(self.run.target, candidate, self.sets,
                          self.after_direction if direction else self.after_candidate,
                          after_sample=self.after_candidate_sample,
                          refresh=None if refresh is None else (lambda: refresh("c")),
                          fresh_inputs=None if direction else self.fresh_inputs, tolerance=self.plan.spec.tolerance,
                          heartbeat=self.heartbeat)
        serve(timer, self.run.channel, f"{self.shape}:{direction}",
              {"device": self.run.target.kind, "sets": len(self.sets), "refresh": refresh is not None})
        return PairedTimes(calls_per_sample=timer.calls_per_sample,
                           launch="cuda_graph" if timer.replays is not None else "eager",
                           timed_candidate=timer.replays)

    def first_own_call(self) -> None:
        """The first call of this worker's kernel on this shape set, untimed, where no correctness case made it (the
        base's worker): a build it starts is build time (CandidateRun.first_call), not the warm-up's."""
        if f"candidate, shape set {self.shape}" in self.run.first_calls:
            return
        inputs = self.sets[0]

        def call() -> Any:
            out = self.call_candidate(inputs)
            self.run.target.synchronize()
            return out

        side = "baseline" if self.plan.side == "baseline" else "candidate"
        self.after_direction(self.run.first_call(side, self.shape, call), 0)
        if self.inplace:
            self.restore_inplace("c")

    def after_direction(self, out: Any, index: int) -> None:
        outputs = as_list(out)
        checks.check_plain_outputs(outputs, self.device_type)
        checks.poison_outputs(outputs)

    def directions(self) -> dict[str, Any]:
        """A backward's directions timed on their own: the forward (no autograd), and the backward on graphs built
        by each side's own forward before every sample, outside the timed region (not forward+backward minus
        forward: a difference of two medians has no paired interval)."""
        base, cand = self.baseline, self.candidate
        split = bool(self.plan.side)  # the other side's directions are timed in its own worker
        forward = self.measure(None if split else (lambda inputs: base.forward(*inputs)),
                               lambda inputs: cand.forward(*inputs), direction="forward")
        sides = {"c": cand} if split else {"b": base, "c": cand}
        graphs: dict[str, dict[int, Any]] = {side: {} for side in sides}
        set_of = {id(inputs): r for r, inputs in enumerate(self.sets)}

        def build(side: str) -> None:
            for r, inputs in enumerate(self.sets):
                if r not in graphs[side]:
                    # An in-place forward (RoPE's) writes copies of the inputs it writes: each side's graph starts
                    # from the inputs as they were made, and no later write reaches a view another graph holds.
                    own = [v.clone() if i in self.inplace else v for i, v in enumerate(inputs)] if self.inplace \
                        else inputs
                    graphs[side][r] = sides[side].build_graph(own)[1]
            self.run.target.synchronize()  # the forward's work done before the next timed region

        def backward_of(side: str) -> Callable[[list[Any]], Any]:
            return lambda inputs: sides[side].backward(*graphs[side].pop(set_of[id(inputs)]))

        for side in sides:
            build(side)
        backward = self.measure(None if split else backward_of("b"), backward_of("c"), refresh=build,
                                direction="backward")
        graphs.clear()
        return {"forward": forward.to_dict(), "backward": backward.to_dict()}

    def first_baseline_call(self) -> None:
        """The baseline's first call on this shape set, untimed, before the warm-up: where it builds (the base
        version of a lazily built kernel, in the gate) that is build time (CandidateRun.first_call), and the warm-up
        then times calls of a built kernel. Only where it has not run on this shape set yet (the profile calls it on
        the first): the candidate's first call was a correctness case's."""
        if f"baseline, shape set {self.shape}" in self.run.first_calls:
            return
        inputs = self.sets[0]

        def call() -> Any:
            out = self.call_baseline(inputs)  # a crash here is the baseline's, as in a timed sample
            self.run.target.synchronize()
            return out

        self.after_baseline(self.run.first_call("baseline", self.shape, call), 0)

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
            checks.perturb_elements(self.sets[r], changed.seed, undo,
                                   skip=heldout.left_alone(self.run.output_slots, self.plan.spec.keep_values))
            self._call_and_save(r, changed.label, changed.cand_file)
            checks.undo_perturbation(undo)

    def move_values(self) -> None:
        # Then move each set's values into the next set's buffers and call once more: a result cached by pointer
        # (switched on only after the correctness calls) now answers with the old values' result.
        sets = self.sets
        if len(sets) > 1:
            values = [[v.clone() if isinstance(v, torch.Tensor) else v for v in s] for s in sets]
            for r, buffers in enumerate(sets):
                fill_buffers(buffers, values[(r + 1) % len(sets)])
                for entry in self.entries:  # the upstream gradients go with the values
                    entry.bind(buffers, self.plan.timing_seed(self.shape, (r + 1) % len(sets)))
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
                # times its own memory or the clock can still tell them apart: docs/evaluation.md, Honest limits).
                replays.poison_outputs()
                self.run.target.settle()  # after the poison, as in timing: the outputs' lines flushed alike
                order = a_sample_holding(r, self.calls_per_sample, len(self.sets))
                for j in order:
                    replays(self.sets[j])
                return replays.output(buffers)
        before = [buffers[i].clone() for i in self.inplace]  # an in-place call's inputs, put back after it
        outputs = self.run.call(fn, buffers, f"timed run, shape set {self.shape}: {what}")
        for i, value in zip(self.inplace, before):
            buffers[i].copy_(value)
        try:
            checks.check_plain_outputs(outputs, self.device_type)
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, f"timed run, shape set {self.shape}: {failure}") from None
        self.run.save(outputs, file)


def fill_buffers(buffers: list[Any], values: list[Any]) -> None:
    """Write `values` into the tensors of `buffers` in place (same pointers, new contents)."""
    for buffer, value in zip(buffers, values):
        if isinstance(buffer, torch.Tensor):
            buffer.copy_(value)
