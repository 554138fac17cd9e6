"""evaluate(spec, candidate, target) -> EvalResult: the one step everything else is built from.

The parent (this module) plans, runs the workers (the trusted reference, kforge_bot.evaluate.references, then
the candidate and the baseline, each in a worker of its own wherever both are timed: evaluate.side_workers),
compares outputs itself and computes every statistic from raw samples
(kforge_bot.evaluate.judge). A verdict never depends on anything the candidate's process claims except raw
timings taken by code bound before the candidate was imported, and the outputs it wrote, which are checked
here.
"""

from __future__ import annotations

import json
import secrets
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kforge_bot.environment import scrubbed_environment
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate import bytecode, isolation
from kforge_bot.evaluate.judge import judge
from kforge_bot.evaluate.wire.limits import limits_for
from kforge_bot.evaluate.wire.plan import Fit, Plan
from kforge_bot.evaluate.references import Progress, ReferenceStore, reference_fit
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.evaluate.sandbox import (STALL_FACTOR, WorkerOutcome, WorkerProcess, raise_on_sandbox_failure,
                                        run_worker, sandbox_view, start_worker)
from kforge_bot.evaluate.scratch import remove_scratch, scratch_root
from kforge_bot.evaluate.shipping import Stager
from kforge_bot.evaluate.side_workers import merge_timing, run_sides
from kforge_bot.evaluate.spares import Spare, SpareWorkers
from kforge_bot.evaluate.static_scan import static_findings
from kforge_bot.kernelspec import Implementation, KernelSpec
from kforge_bot.targets import TargetChoice, choose_target, target_index


def new_seeds(count: int) -> list[int]:
    """Fresh secret seeds per evaluation, 63 bits each (too many to find by trying seeds against the inputs a
    candidate sees): a candidate cannot be tuned to a fixed set of inputs, nor rebuild the timed ones."""
    return [secrets.randbits(63) for _ in range(count)]


def evaluate(
    spec: KernelSpec,
    candidate: Implementation,
    target: str | TargetChoice = "auto",
    settings: EvalSettings | None = None,
    *,
    baseline: Implementation | None = None,
    seeds: list[int] | None = None,
    references: ReferenceStore | None = None,
    progress: Progress | None = None,
    spares: SpareWorkers | None = None,
    one_worker: bool = False,
) -> EvalResult:
    """`one_worker`: base and head in one worker, as before the split, for measuring what the split costs
    (benchmarks/gate_decision_cost.py --one-worker) only; no command or policy sets it."""
    settings = settings or EvalSettings()
    kind = choose_target(target).device_kind(spec.targets)
    baseline = baseline or spec.baseline
    seeds = seeds or new_seeds(settings.seed_count(spec.seeds))
    rejected = _static_rejection(candidate, kind)
    if rejected is not None:
        return rejected

    store = references or ReferenceStore()
    views = _views(spec, candidate, baseline, kind, settings, one_worker)
    spare = spares.take(views.key) if spares is not None else None
    base_spare = spares.take_base(views.base_key) if spares is not None and views.split else None
    # The next spares: on a GPU, started now and held off the device until this timing is over (spares.py).
    spare_early = kind != "cpu"
    if spares is not None and spare_early:
        _prepare_spares(spares, views, kind, hold_device=True)
    work = spare.work if spare is not None else Path(tempfile.mkdtemp(prefix="kforge-eval-", dir=scratch_root()))
    try:
        full = Plan(role="candidate", target=kind, spec=spec, baseline=baseline, candidate=candidate,
                    settings=settings, seeds=seeds, out_dir=work, await_fit=True,
                    ship_inputs=views.split and ships_inputs(spec, candidate),
                    limits=limits_for(settings, kind, views.template is not None, str(scratch_root())))
        result = _run_and_judge(full, store, views.template, spare, progress, views.split, views.base_template,
                                base_spare)
    finally:
        remove_scratch(work)
        if references is None:
            store.cleanup()
    if spares is not None and spare_early:  # timing is over: the spares may make their device contexts now
        spares.release()
    elif spares is not None:  # the CPU: the next evaluation's workers start only now, while the caller moves on
        _prepare_spares(spares, views, kind, hold_device=False)
    return result


def ships_inputs(spec: KernelSpec, candidate: Implementation) -> bool:
    """Whether the head's worker gets its inputs as files (Plan.ship_inputs): where the reference or the inputs
    come from another checkout than the candidate's (the gate's base), importing them would run the base's files,
    often the kernel's own, in the head's process."""
    if not candidate.root:
        return False
    own = Path(candidate.root).resolve()
    return any(i.root and Path(i.root).resolve() != own for i in (spec.reference, spec.inputs_source))


@dataclass(frozen=True)
class _Views:
    """One evaluation's workers as the sandbox shows them: whether base and head get a worker each (`split`), the
    views less their scratch, and the key a spare must match to serve as each."""

    split: bool
    template: isolation.View | None
    base_template: isolation.View | None
    key: str
    base_key: str
    base_role: str


def _views(spec: KernelSpec, candidate: Implementation, baseline: Implementation, kind: str,
           settings: EvalSettings, one_worker: bool) -> _Views:
    """The sandbox's view less its scratch: one lookup of the folders it shows, for this evaluation's (head's)
    worker, the key a spare must match, and the next spare."""
    # Base and head each in a worker of their own wherever both run (side_workers); one worker where nothing is
    # timed, or where both sides are the same implementation.
    split = settings.measure and not one_worker and candidate.to_dict() != baseline.to_dict()
    template = sandbox_view(spec, [candidate] if split else [candidate, baseline], kind, Path("/scratch"), settings)
    base_template = sandbox_view(spec, [baseline], kind, Path("/scratch"), settings) if split else None
    base_role = "candidate" if settings.profile else "baseline"  # BaseWorker.start's
    return _Views(split=split, template=template, base_template=base_template,
                  key=_spare_key(kind, template, "candidate"),
                  base_key=_spare_key(kind, base_template, base_role) if split else "", base_role=base_role)


def _prepare_spares(spares: SpareWorkers, views: _Views, kind: str, hold_device: bool) -> None:
    """The next evaluation's spare workers (the base's too, `split`), started by `spares` for the same views."""
    base = (views.base_key, lambda: _start_spare(views.base_template, kind, spares.root, hold_device,
                                                 views.base_role, "base")) if views.split else None
    spares.prepare(views.key, lambda: _start_spare(views.template, kind, spares.root, hold_device), base)


def _spare_key(kind: str, view: isolation.View | None, role: str) -> str:
    """What a spare must have been started for to serve: the target, its role's warm-up, and the sandbox's view
    less its scratch."""
    return json.dumps([kind, role, None if view is None else
                       [sorted(map(str, view.readable)), sorted(map(str, view.writable)), view.devices,
                        str(view.bytecode)]])


def import_problem(spec: KernelSpec, settings: EvalSettings, timeout_s: float = 120.0) -> str | None:
    """Import the kernel's entry, reference and inputs in a worker (sandboxed as every worker is), calling nothing;
    None where they import, else why not in one line. The target is the first of the kernel's own this machine has,
    else the CPU (an import needs no device)."""
    try:
        kind = choose_target("auto").device_kind(spec.targets)
    except KforgeError:
        kind = "cpu"
    work = Path(tempfile.mkdtemp(prefix="kforge-import-", dir=scratch_root()))
    try:
        plan = Plan(role="imports", target=kind, spec=spec, baseline=spec.baseline, candidate=None,
                    settings=settings, seeds=[0], out_dir=work)
        outcome = run_worker(plan.to_dict(), work, timeout_s, view=sandbox_view(spec, [spec.baseline], kind, work,
                                                                                settings))
        raise_on_sandbox_failure(outcome)
    finally:
        remove_scratch(work)
    message = outcome.result or {}
    if message.get("status") == "ok":
        return None
    return str(message.get("reason") or f"its worker {outcome.exit_description()}")


def import_problems(specs: list[KernelSpec], settings: EvalSettings, timeout_s: float = 120.0,
                    per_kernel_s: float = 10.0) -> list[str | None]:
    """import_problem for many kernels, in as few workers as there are groups of one target, `env:` and import
    roots (what one kernel imports never depends on another's roots): each worker imports a library once and looks
    every entry of the group up in it (`list --import`). One problem (or None) per spec,
    in order; a worker that dies takes its whole group with it, each kernel saying so."""
    def kind_of(spec: KernelSpec) -> str:
        try:
            return choose_target("auto").device_kind(spec.targets)
        except KforgeError:
            return "cpu"

    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, spec in enumerate(specs):
        key = (kind_of(spec), tuple(sorted(spec.env.items())), spec.root, spec.baseline.paths)
        groups.setdefault(key, []).append(i)
    problems: list[str | None] = [None] * len(specs)
    for (kind, *_), members in groups.items():
        batch = [specs[i] for i in members]
        work = Path(tempfile.mkdtemp(prefix="kforge-import-", dir=scratch_root()))
        try:
            plan = Plan(role="imports", target=kind, spec=batch[0], baseline=batch[0].baseline, candidate=None,
                        settings=settings, seeds=[0], out_dir=work, also=batch[1:])
            seen = [impl for s in batch for impl in (s.baseline, s.reference, s.inputs_source)]
            outcome = run_worker(plan.to_dict(), work, timeout_s + per_kernel_s * len(batch),
                                 view=sandbox_view(batch[0], seen, kind, work, settings))
            raise_on_sandbox_failure(outcome)
        finally:
            remove_scratch(work)
        message = outcome.result or {}
        found = message.get("imports")
        if not isinstance(found, list) or len(found) != len(batch):
            found = [str(message.get("reason") or f"its worker {outcome.exit_description()}")] * len(batch)
        for i, problem in zip(members, found):
            problems[i] = None if problem is None else str(problem)
    return problems


def _static_rejection(candidate: Implementation, target: str) -> EvalResult | None:
    """The static scan's verdict, before any process starts (None: nothing found)."""
    findings = static_findings(candidate.source)
    if not findings:
        return None
    more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
    return EvalResult(verdict="rejected", target=target, reason=f"static check: {findings[0]}{more}",
                      details={"static_findings": [str(f) for f in findings]})


def _stager(full: Plan, store: ReferenceStore, worker: WorkerProcess) -> Stager:
    """What hands the head's worker the reference's recorded inputs (Plan.ship_inputs): files, and on a GPU device
    memory over the worker's output channel."""
    args = (full.spec, full.target, full.seeds, full.settings)
    return Stager(store.shipped_folder(*args), full.out_dir, store.shipped_on_device(*args),
                  worker.shared.send if worker.shared is not None else None, target_index(full.target))


def _run_and_judge(full: Plan, store: ReferenceStore, template: isolation.View | None, spare: Spare | None,
                   progress: Progress | None, split: bool = False,
                   base_template: isolation.View | None = None, base_spare: Spare | None = None) -> EvalResult:
    """The reference's outputs (or the store's copy), the candidate's worker (and the base's, `split`) on the plan
    they fit, and the verdict, with where the time went."""
    clock = _Laps()
    settings = full.settings
    # The candidate's worker starts now and imports torch while the reference runs. Sandboxed, it cannot
    # see the reference's files, so it gets its plan at once and imports and builds the candidate meanwhile
    # (compilers included); unsandboxed, only after the reference's outputs are read back and deleted.
    # Either way it makes its first call only after the reference has finished and sent its Fit. The base's
    # worker, where it has one, likewise.
    view = None if template is None else replace(template, scratch=full.out_dir)
    worker = spare.worker if spare is not None else start_worker(full.out_dir, "candidate", view=view,
                                                                 warm=full.target)
    base = BaseWorker.start(full, base_template, base_spare) if split else None
    workers = [(worker, replace(full, side="candidate", baseline=full.spec.reference) if split else full)]
    if base is not None:
        workers.append((base.worker, base.plan))
    stager: Stager | None = None
    try:
        if view is not None:
            _send_plans(workers)
        ref_outputs, ref_result = store.ensure(full.spec, full.target, full.seeds, settings, progress,
                                               ship=full.ship_inputs)
        stager = _stager(full, store, worker) if full.ship_inputs else None
        parent = {"reference_s": clock.lap()}  # about 0 when an earlier candidate's reference run is reused
        fit = reference_fit(ref_result)
        _send_fit(workers, fit, plans_sent=view is not None, paired=base is not None)
        plan = full.fitted(fit)
        stall_s = max(settings.stall_floor_s, STALL_FACTOR * float(ref_result.get("slowest_case_s") or 0.0))
        outcome, base_outcome = _run_workers(worker, base, plan, stall_s, progress, stager)
        raise_on_sandbox_failure(outcome)
        parent["candidate_worker_s"] = clock.lap()
    except BaseException:
        if worker.shared is not None:  # what it handed over holds device memory: nothing will compare it now
            worker.shared.close()
        raise
    finally:
        worker.discard()
        if base is not None:
            base.close()
        if stager is not None:
            stager.close()
    try:
        result = judge(plan, outcome, ref_outputs, ref_result)
    finally:
        if outcome.shared is not None:
            outcome.shared.close()
    parent["compare_s"] = clock.lap()
    parent["total_s"] = clock.total()
    _record_phases(result, parent, ref_result, outcome, base_outcome, stall_s, spare is not None, template)
    if base is not None:
        result.details["phases"]["baseline_worker_started_early"] = base_spare is not None
    if stager is not None:  # how the recorded inputs reached the head: as device memory, or through the host
        result.details["shipped_inputs"] = dict(stager.handed)
    if fit.note:  # a large problem: fewer seeds and timed sets than asked, and why
        result.details["memory_fit"] = fit.to_dict()
    result.details.setdefault("seeds", plan.seeds)
    return result


class _Laps:
    """The parent's own steps, timed one after the other: seconds since the last lap, and since the start."""

    def __init__(self) -> None:
        self.started = self.last = time.monotonic()

    def lap(self) -> float:
        now = time.monotonic()
        spent, self.last = now - self.last, now
        return round(spent, 3)

    def total(self) -> float:
        return round(time.monotonic() - self.started, 3)


def _send_plans(workers: list[tuple[WorkerProcess, Plan]]) -> None:
    """Each worker its plan, a line (the reference's Fit) still to follow."""
    for each, plan_of in workers:
        each.send(plan_of.to_dict(), more=True)


def _send_fit(workers: list[tuple[WorkerProcess, Plan]], fit: Fit, plans_sent: bool, paired: bool) -> None:
    """Each worker the reference's Fit (its plan first, where it has not had it: unsandboxed). A lone worker's
    stdin closes after it; a pair's stays open: the timing's requests follow (pair_driver)."""
    for each, plan_of in workers:
        if not plans_sent:
            each.send(plan_of.to_dict(), more=True)
        if not paired:
            each.send_last(fit.to_dict())
        else:
            each.command(fit.to_dict())


def _run_workers(worker: WorkerProcess, base: BaseWorker | None, plan: Plan, stall_s: float,
                 progress: Progress | None, stager: Stager | None) -> tuple[WorkerOutcome, WorkerOutcome | None]:
    """The candidate's worker to its end, or both sides' (`base`): their outcomes."""
    scratch_limit = plan.limits.scratch_bytes if plan.limits else None
    if base is None:
        return worker.run(None, plan.settings.timeout_s, on_message=progress, stall_s=stall_s,
                          scratch_limit=scratch_limit), None
    return _run_pair(worker, base.worker, plan, stall_s, scratch_limit, progress, stager)


def _run_pair(head: WorkerProcess, base: WorkerProcess, plan: Plan, stall_s: float, scratch_limit: int | None,
              progress: Progress | None, stager: Stager | None) -> tuple[WorkerOutcome, WorkerOutcome | None]:
    """Both sides' workers to their end (side_workers), and the head's outcome with the parent's timing and the
    base's profile in it: what the judge reads."""
    pair = run_sides(head, base, plan.settings, len(plan.spec.timed_indices()), stall_s=stall_s,
                     scratch_limit=scratch_limit, progress=progress, stager=stager)
    raise_on_sandbox_failure(pair.base or pair.judged)
    message = pair.judged.result
    if message is not None and message.get("status") == "ok":
        merge_timing(message, pair.driven)
        base_message = (pair.base.result if pair.base is not None else None) or {}
        base_profile = (base_message.get("profile") or {}).get("candidate")
        if isinstance(message.get("profile"), dict) and base_profile is not None:
            message["profile"]["baseline"] = base_profile  # the head's worker profiled the reference, not the base
            for part in ("reference", "reference_flops"):  # shipped, the head's worker holds no reference
                if part not in message["profile"] and part in (base_message.get("profile") or {}):
                    message["profile"][part] = base_message["profile"][part]
    return pair.judged, pair.base


def _record_phases(result: EvalResult, parent: dict[str, Any], ref_result: dict[str, Any], outcome: WorkerOutcome,
                   base_outcome: WorkerOutcome | None, stall_s: float, early: bool,
                   template: isolation.View | None) -> None:
    """Where an evaluation's wall time goes: the parent's steps, and each worker's own phases."""
    message = outcome.result or {}
    result.details["phases"] = {"parent": parent, "reference_worker": ref_result.get("phases") or {},
                                "candidate_worker": message.get("phases") or {}, "no_progress_limit_s": stall_s,
                                "worker_started_early": early}
    if base_outcome is not None:
        result.details["phases"]["baseline_worker"] = (base_outcome.result or {}).get("phases") or {}
    if template is not None:  # where the workers' compiled Python came from (evaluate.bytecode)
        result.details["phases"]["bytecode"] = bytecode.for_workers(scrubbed_environment()).describe()


class BaseWorker:
    """The base's own worker (Plan.side "baseline"): its scratch, its sandbox view, its plan."""

    def __init__(self, worker: WorkerProcess, work: Path, plan: Plan) -> None:
        self.worker, self.work, self.plan = worker, work, plan

    @classmethod
    def start(cls, full: Plan, template: isolation.View | None, spare: Spare | None = None) -> BaseWorker:
        """The base's worker: `spare` where one was started ahead for it (SpareWorkers.take_base), else a new one."""
        if spare is not None:
            worker, work = spare.worker, spare.work
        else:
            work = Path(tempfile.mkdtemp(prefix="kforge-base-", dir=scratch_root()))
            view = None if template is None else replace(template, scratch=work)
            # Warmed as a reference's is (the device alone): the gate profiles nothing.
            role = "candidate" if full.settings.profile else "baseline"
            worker = start_worker(work, role, view=view, warm=full.target)
        plan = replace(full, side="baseline", candidate=full.baseline, baseline=full.spec.reference, out_dir=work,
                       ship_inputs=False)  # the base imports its own files
        return cls(worker, work, plan)

    def close(self) -> None:
        self.worker.discard()
        if self.worker.shared is not None:
            self.worker.shared.close()
        remove_scratch(self.work)


def _start_spare(template: isolation.View | None, target: str, root: Path | None, hold_device: bool = False,
                 role: str = "candidate", prefix: str = "eval") -> tuple[WorkerProcess, Path]:
    work = Path(tempfile.mkdtemp(prefix=f"kforge-{prefix}-", dir=root or scratch_root()))
    view = None if template is None else replace(template, scratch=work)
    return start_worker(work, role, view=view, warm=target, hold_device=hold_device), work
