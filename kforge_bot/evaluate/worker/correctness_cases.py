"""The candidate role's correctness phase (kforge_bot.evaluate.worker.candidate_role): each listed case and each
held-out variant run once through the run's guarded call, its outputs checked plain and fresh, its inputs unchanged,
the problem's own check where it has one, the same buffers again with new values, and every output saved for the
parent's comparison with the reference's."""

from __future__ import annotations

import traceback
from typing import Any

import torch

from kforge_bot.evaluate.worker import calls, loading
from kforge_bot.evaluate.wire import checks, heldout
from kforge_bot.evaluate.wire.plan import Case
from kforge_bot.evaluate.worker.shape_timing import fill_buffers
from kforge_bot.evaluate.worker.worker_io import Stop, short_error


class CorrectnessCases:
    """The correctness calls of one candidate's run, one case at a time (`listed`, `heldout`)."""

    def __init__(self, run: Any) -> None:
        # `run`: the candidate role's CandidateRun (its guards, calls and channel); not imported here, which
        # would tie the two modules in a circle.
        self.run = run

    def listed(self, case: Case) -> None:
        """A listed shape set on one seed: checked, put to the problem's own check, run again in the same buffers."""
        run = self.run
        spec = run.spec
        inputs = loading.make_inputs(spec, run.inputs_module, spec.shape_sets[case.shape], case.seed, run.device)
        before = checks.snapshot_inputs(inputs)
        entry = run.cand_fn if isinstance(run.cand_fn, calls.EntryCall) else None
        if entry is not None:
            entry.bind(inputs, case.seed)  # the upstream gradients the reference's worker drew for this seed
        outputs = run.first_call("candidate", case.shape,
                                 lambda: run.call(run.cand_fn, inputs, f"running {case.label}"))
        returned = run.last_output
        self._checked_and_saved(case, outputs, inputs, before, entry)
        if run.oracle is not None:
            self._problem_oracle(case, inputs, before, returned)
        if case.reuse_file:
            self._same_buffers_again(case, inputs, outputs)
        run.channel.send("progress", phase="correctness", case=case.label)

    def heldout(self, case: Case) -> None:
        """A held-out variant (evaluate.wire.heldout): the candidate on sizes and values no listed case has, built
        again where the variant changes its constructor's arguments. Failing to run there is being wrong there."""
        run = self.run
        spec, variant = run.spec, heldout.Variant.from_dict(case.variant or {})
        cand_fn = run.cand_fn
        with run.sizes_of(variant):
            if loading.init_key(spec, run.inputs_module) != run.listed_init:
                weights = run.variant_weights()
                try:
                    built = loading.build_callable(run.cand_obj, spec, run.inputs_module, run.device,
                                                   run.plan.init_seed, state_from=weights)
                except Exception as exc:  # noqa: BLE001 - the candidate cannot be built for these sizes
                    run.no_reaching_in(f"building for {case.label}")
                    raise Stop("incorrect", f"{case.label}: the candidate could not be built: {short_error(exc)}",
                               traceback.format_exc()[-4000:]) from None
                cand_fn = calls.wrap(run.cand_obj, built, spec, own_oracle=False, module=run.cand_module)
                del weights
            shape = heldout.shape_of(variant, spec.shape_sets[case.shape])
            inputs = loading.make_inputs(spec, run.inputs_module, shape, case.seed, run.device)
            heldout.change_values(inputs, variant.values, variant.seed,
                                  heldout.left_alone(run.output_slots, spec.keep_values))
        run.no_threads_left(f"building for {case.label}")
        run.guard(f"building for {case.label}")
        run.restore_state()
        before = checks.snapshot_inputs(inputs)
        entry = cand_fn if isinstance(cand_fn, calls.EntryCall) else None
        if entry is not None:
            entry.bind(inputs, case.seed)
        try:
            outputs = run.first_call("candidate", f"{heldout.LABEL_PREFIX} {variant.index}",
                                     lambda: run.call(cand_fn, inputs, f"running {case.label}"))
        except Stop as stop:
            if stop.status not in ("crash", "compile_error"):
                raise
            hint = "; a kernel meant for some sizes only declares them: constraints: in kforge.yaml" \
                if spec.format == "manifest" else ""
            raise Stop("incorrect", f"{stop.reason} (it runs on the listed shapes only?{hint})", stop.detail) from None
        self._checked_and_saved(case, outputs, inputs, before, entry)
        run.channel.send("progress", phase="correctness", case=case.label)

    def _checked_and_saved(self, case: Case, outputs: list[Any], inputs: list[Any], before: list[Any],
                           entry: calls.EntryCall | None) -> None:
        """A correctness call's outputs plain and fresh, its inputs unchanged (but those it may write), then saved
        for the parent's comparison."""
        run = self.run
        try:
            checks.check_plain_outputs(outputs, run.device.type)
            checks.check_no_alias(outputs if entry is None else entry.fresh(outputs), inputs, run.output_slots)
            checks.check_inputs_unchanged(inputs, before, () if entry is None else entry.written,
                                          skip=run.output_slots)
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, f"{case.label}: {failure}") from None
        run.save(outputs, case.cand_file)

    def _problem_oracle(self, case: Case, inputs: list[Any], before: list[Any], returned: Any) -> None:
        """The problem's own check (GPU MODE's check_implementation(data, output)), beside the bot's comparison,
        never instead of it: on copies of the inputs as they were before the call (the reference it runs may write
        an output buffer) and of the output, after the output was saved for the bot."""
        from torch.utils import _pytree

        run = self.run
        data = loading.DataInputs([t.clone() if isinstance(t, torch.Tensor) else t for t in before],
                                  inputs.structure).data() if isinstance(inputs, loading.DataInputs) else before
        output = _pytree.tree_map(lambda t: torch.Tensor.clone(t) if type(t) is torch.Tensor else t,  # noqa: E721
                                  returned)
        try:
            verdict = run.oracle(data, output)  # type: ignore[misc]
            run.target.synchronize()
        except Exception as exc:  # noqa: BLE001 - the check failing on this output is a failed check
            raise Stop("incorrect", f"{case.label}: the problem's {run.spec.oracle_symbol} raised "
                                    f"{short_error(exc)}") from None
        run.guard("in the problem's check")
        run.restore_state()
        good, message = _oracle_verdict(verdict)
        if not good:
            raise Stop("incorrect", f"{case.label}: the problem's {run.spec.oracle_symbol} failed: "
                                    f"{message[:500] or 'no reason given'}")

    def _same_buffers_again(self, case: Case, inputs: list[Any], outputs: list[Any]) -> None:
        # Same input buffers, new values: a result cached by pointer or shape shows up here, and an
        # output buffer reused across calls overwrites the first result.
        run = self.run
        spec = run.spec
        kept = [o.clone() for o in outputs]
        fresh = loading.make_inputs(spec, run.inputs_module, spec.shape_sets[case.shape], case.reuse_seed, run.device)
        fill_buffers(inputs, fresh)
        if isinstance(run.cand_fn, calls.EntryCall):
            run.cand_fn.bind(inputs, case.reuse_seed or 0)
        again = run.call(run.cand_fn, inputs, f"running {case.label} again with new values in the same buffers")
        try:
            checks.check_plain_outputs(again, run.device.type)
        except checks.CheckFailure as failure:
            raise Stop(failure.kind, f"{case.label}: {failure}") from None
        run.save(again, case.reuse_file)
        for i, (first, copy) in enumerate(zip(outputs, kept)):
            if checks.aliases_any(first, inputs, run.output_slots):
                continue  # the output buffer the harness hands every call: written again by design
            if not torch.equal(first.nan_to_num(), copy.nan_to_num()):
                raise Stop("rejected", f"{case.label}: output {i} of an earlier call changed when the "
                                       "candidate ran again (output buffers reused across calls)")


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
