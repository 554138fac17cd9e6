"""The candidate's outputs against the reference's, for the verdict (kforge_bot.evaluate.judge): every case in
its order (correctness, held-out variants, the timed calls' outputs, and after timing the changed and moved inputs)
up to the first failure, each output file checked to be one the worker saved, and the summary the result keeps.
torch is imported only once a comparison starts (see evaluate.judge's module docstring)."""

from __future__ import annotations

from typing import Any

from kforge_bot.evaluate.wire import heldout, outputs
from kforge_bot.evaluate.wire.plan import Case, Plan


def compare_all(plan: Plan, ref_outputs: dict[str, list[Any]], timed: bool,
                 shared: outputs.SharedOutputs | None = None, saved: Any = None,
                 nothing_to_change: bool = False) -> dict[str, Any]:
    """Every case's outputs against the reference's. `saved` is the worker's word, over its nonce channel, on
    what it saved: each file's digest (None: handed over as device memory). The files lie in the worker's
    scratch, which the candidate's code can write, so a file must be one the worker saved, still hold what it
    wrote, and not have gone missing. `nothing_to_change`: the reference's word that the changed-elements cases had
    no input to change (the check is then not claimed)."""
    comparison = _Comparison(plan, ref_outputs, shared, saved)
    # In this order, up to the first failure; after timing, only where the candidate was timed.
    failure = (comparison.correctness_cases() or comparison.heldout_cases() or comparison.timed_outputs()
               or (comparison.after_timing() if timed else None))
    return _correctness_summary(plan, comparison.records, comparison.via, failure,
                                _checks_made(plan, timed, nothing_to_change))


class _Comparison:
    """The candidate's outputs against the reference's, case by case (`check`: None where they match, else
    'status|reason'), and what the checks found: a record of each case compared, and how the outputs came back."""

    def __init__(self, plan: Plan, ref_outputs: dict[str, list[Any]], shared: outputs.SharedOutputs | None,
                 saved: Any) -> None:
        from kforge_bot.evaluate.wire.checks import comparison_device  # imports torch (see module doc)

        self.plan = plan
        self.ref_outputs = ref_outputs
        self.shared = shared
        self.device = comparison_device(plan.target)
        self.handed_over = shared.names() if shared is not None else set()
        self.digests: dict[str, Any] = saved if isinstance(saved, dict) else {}
        self.records: list[dict[str, Any]] = []
        self.via: set[str] = set()  # how the candidate's outputs came back

    def correctness_cases(self) -> str | None:
        """Each correctness case, and where it has one its call again on another seed's values in the same buffers."""
        for case in self.plan.correctness_cases():
            failure = self.check(case, case.cand_file, case.ref_file, case.label)
            if failure is None and case.reuse_file and case.reuse_ref_file:
                failure = _as_cached(self.check(case, case.reuse_file, case.reuse_ref_file,
                                                f"{case.label}, called again with seed {case.reuse_seed}'s values "
                                                "in the same buffers"), "result cached across calls?")
            if failure:
                return failure
        return None

    def heldout_cases(self) -> str | None:
        for case in self.plan.heldout_cases():
            failure = self.check(case, case.cand_file, case.ref_file, case.label)
            if failure:
                return failure
        return None

    def timed_outputs(self) -> str | None:
        for case in self.plan.timing_cases():
            if case.cand_file not in self.handed_over and case.cand_file not in self.digests \
                    and not (self.plan.out_dir / case.cand_file).is_file():
                continue  # a very slow kernel may not reach every rotated set; the ones it saved are checked
            failure = self.check(case, case.cand_file, case.ref_file, case.label)
            if failure:
                return failure
        return None

    def after_timing(self) -> str | None:
        # After timing, these values (or nearly these) passed moments before: a wrong answer is read as a cache.
        for cases, keyed_by in ((self.plan.changed_cases(), "input buffer or values"),
                                (self.plan.moved_cases(), "input buffer")):
            for case in cases:
                failure = _as_cached(self.check(case, case.cand_file, case.ref_file, case.label),
                                     f"result cached by {keyed_by}?")
                if failure:
                    return failure
        return None

    def check(self, case: Case, cand_file: str, ref_file: str, label: str) -> str | None:
        """One case's outputs (in `cand_file`, or handed over as device memory) against the reference's."""
        from kforge_bot.evaluate.wire.checks import compare_outputs

        failure = self._unsaved(cand_file, label)
        if failure:
            return failure
        self.via.add("device memory" if cand_file in self.handed_over else "files")
        cand, failure = self._load(cand_file, label)
        if failure:
            return failure
        ref = self.ref_outputs[ref_file]
        spec = self.plan.spec
        per_output = compare_outputs(cand, ref, spec.tolerance, self.device, gradients=len(spec.grad_inputs),
                                     gradient_override=spec.backward_tolerance)
        del cand
        self.records.append({"case": label, "shape_set": case.shape, "seed": case.seed, "outputs": per_output})
        bad = next((o for o in per_output if not o["ok"]), None)
        return f"incorrect|{label}: {_output_name(self.plan, bad['index'], len(per_output))}: {bad['problem']}" \
            if bad else None

    def _unsaved(self, cand_file: str, label: str) -> str | None:
        """Why a case's output file is not one the worker saved (gone, never written, or planted), or None."""
        on_disk = (self.plan.out_dir / cand_file).is_file()
        if cand_file in self.handed_over:
            return None
        if cand_file in self.digests and not on_disk:
            return f"rejected|{label}: the output the harness saved is gone (deleted by the candidate?)"
        if not on_disk:
            return f"rejected|{label}: the candidate's process produced no output for this case"
        if not isinstance(self.digests.get(cand_file), str):
            (self.plan.out_dir / cand_file).unlink(missing_ok=True)
            return f"rejected|{label}: an output file the harness never saved (written by the candidate?)"
        return None

    def _load(self, cand_file: str, label: str) -> tuple[Any, str | None]:
        """The case's outputs, or why they could not be read; the file is removed either way."""
        from kforge_bot.evaluate.wire.tensorfile import ChangedTensorFile

        try:
            return outputs.load(self.plan.out_dir, cand_file, self.shared, self.digests.get(cand_file)), None
        except ChangedTensorFile:
            return None, f"rejected|{label}: the output file was changed after the harness saved it"
        except Exception as exc:  # noqa: BLE001 - a forged or truncated output is the candidate's problem
            return None, f"rejected|{label}: unreadable output ({type(exc).__name__}: {str(exc)[:200]})"
        finally:
            (self.plan.out_dir / cand_file).unlink(missing_ok=True)  # compared once; outputs must not pile up


def _as_cached(failure: str | None, why: str) -> str | None:
    """A wrong answer where a right one passed moments before reads as a cache: a rejection, saying so."""
    if failure and failure.startswith("incorrect|"):
        return "rejected|" + failure.split("|", 1)[1] + f" ({why})"
    return failure


def _output_name(plan: Plan, index: int, count: int) -> str:
    """'output 0', or for a kernel with a backward (its gradients come last) 'the gradient of input x'."""
    grads = plan.spec.grad_inputs
    first = count - len(grads)
    if grads and index >= first:
        written = ", as written into it" if grads[index - first] in plan.spec.grad_inplace else ""
        return f"the gradient of input {grads[index - first]}{written} (output {index})"
    return f"output {index}"


def _correctness_summary(plan: Plan, records: list[dict[str, Any]], via: set[str],
                         failure: str | None, checks: list[str]) -> dict[str, Any]:
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
        "checks": checks,
        "records": records,
        "heldout": heldout_summary(plan),
    }
    if failure:
        summary["status"], summary["reason"] = failure.split("|", 1)
    return summary


def _checks_made(plan: Plan, timed: bool = True, nothing_to_change: bool = False) -> list[str]:
    """The checks this evaluation made: those after timing only where the candidate was timed, and the changed
    elements only where an input could be changed (a run that checked nothing claims nothing)."""
    made = ["shape and dtype", "NaN/Inf", "elementwise atol/rtol", "relative norm", "non-constant",
            "inputs unchanged", "no aliasing", "plain tensors"]
    if any(c.reuse_file for c in plan.correctness_cases()):
        made += ["same buffers new values", "earlier outputs not overwritten"]
    changed = [] if nothing_to_change else plan.changed_cases()
    for cases, check in ((plan.timing_cases(), "timed outputs"), (changed, "elements of each timed input set changed"),
                         (plan.moved_cases(), "values moved between timed buffers")):
        if cases and timed:
            made.append(check)
    return made


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
