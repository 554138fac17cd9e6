"""evaluate(spec, candidate, target) -> EvalResult: the one step everything else is built from.

The parent (this module) plans, runs two workers (the trusted reference, then the candidate with the
baseline), compares outputs itself and computes every statistic from raw samples. A verdict never
depends on anything the candidate's process claims except raw timings taken by code bound before the
candidate was imported, and the outputs it wrote, which are checked here.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from kforge_bot.errors import KforgeError
from kforge_bot.evaluate import bound, devshare, isolation, outputs
from kforge_bot.evaluate.plan import Case, Fit, Plan
from kforge_bot.evaluate.result import EvalResult, EvalSettings, TimingStats
from kforge_bot.evaluate.sandbox import STALL_FACTOR, ChildOutcome, WorkerProcess, run_worker, start_worker
from kforge_bot.evaluate.spares import SpareWorkers
from kforge_bot.evaluate.static_scan import static_findings
from kforge_bot.evaluate.stats import speedup_from_pairs, summarize, systematic_floor, widen
from kforge_bot.spec import Implementation, KernelSpec
from kforge_bot.targets import resolve_target_name

Progress = Callable[[dict[str, Any]], None]
REFERENCE_TIMEOUT_S = 600.0


def sandbox_view(spec: KernelSpec, implementations: list[Implementation | None], target: str,
                 scratch: Path, settings: EvalSettings) -> isolation.View | None:
    """What a worker on `target` may see, or None where the policy lets it run unsandboxed (`required` raises
    when the machine cannot sandbox). Readable: the kernel's source folders; writable: its scratch alone."""
    if not isolation.resolve_mode(settings.isolation):
        return None
    roots = {Path(spec.root)} | {Path(i.root) for i in (spec.reference, spec.inputs_source, *implementations)
                                 if i is not None and i.root}
    extensions = os.environ.get("KFORGE_EXTENSIONS_ROOT")  # compile-ahead builds: read-only, copied when used
    readable = roots | ({Path(extensions)} if extensions else set())
    return isolation.View(scratch=scratch, readable=tuple(sorted(readable)), devices=target.split(":")[0])


def _scratch_root() -> Path:
    # Outputs travel as files: keep them in memory-backed storage where the machine has it.
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return base


class ReferenceStore:
    """Reference outputs computed once per (spec, target, seeds) and reused by every candidate.

    They are kept in this (the parent's) memory, and the reference worker's files are deleted as soon as
    they are read: a candidate runs as the same user and could otherwise simply load the expected outputs
    from disk.
    """

    def __init__(self, root: Path | None = None) -> None:
        self._own = root is None
        self.root = Path(tempfile.mkdtemp(prefix="kforge-ref-", dir=_scratch_root())) if root is None else root
        self._done: dict[str, tuple[dict[str, list[Any]], dict[str, Any]]] = {}
        self._lock = threading.Lock()  # evaluations in threads share a store: one reference run per key

    def key(self, spec: KernelSpec, target: str, seeds: list[int], settings: EvalSettings) -> str:
        material = json.dumps([spec.reference.to_dict(), spec.inputs_source.to_dict(), spec.inputs_symbol,
                               spec.init_symbol, spec.init_kwargs, list(spec.shape_sets), target, seeds,
                               settings.measure, settings.rotate_sets], sort_keys=True,
                              default=str)
        return hashlib.sha256(material.encode()).hexdigest()[:16]

    def ensure(self, spec: KernelSpec, target: str, seeds: list[int], settings: EvalSettings,
               progress: Progress | None) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        """(reference outputs by file name, the reference worker's result message)."""
        key = self.key(spec, target, seeds, settings)
        with self._lock:
            if key not in self._done:
                self._done[key] = self._compute(key, spec, target, seeds, settings, progress)
            return self._done[key]

    def _compute(self, key: str, spec: KernelSpec, target: str, seeds: list[int], settings: EvalSettings,
                 progress: Progress | None) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        _import_torch_meanwhile(target)
        folder = self.root / key
        plan = Plan(role="reference", target=target, spec=spec, baseline=spec.reference, candidate=None,
                    settings=settings, seeds=seeds, out_dir=folder)
        folder.mkdir(parents=True, exist_ok=True)
        written: list[dict[str, Any]] = []  # the reference's progress: how far it got, and how much it wrote

        def on_message(message: dict[str, Any]) -> None:
            if message.get("phase") == "reference":
                written.append(message)
            if progress is not None:
                progress(message)

        outcome = None
        try:
            outcome = run_worker(plan.to_dict(), folder, REFERENCE_TIMEOUT_S, on_message=on_message,
                                 view=sandbox_view(spec, [], target, folder, settings))
            _raise_on_sandbox_failure(outcome)
            result = outcome.result
            if result is not None and result.get("status") == "unavailable":
                raise KforgeError(f"target {target!r} is not available on this machine: {result.get('reason')}",
                                  hint="run `kforge-bot doctor` to see what is, or use --target auto")
            if result is not None and result.get("status") == "too_large":
                raise KforgeError(f"kernel {spec.name!r} does not fit on {target}: {result.get('reason')}",
                                  path=Path(spec.root) / spec.kernel_file,
                                  hint="use a smaller shape set, or a machine with more memory (KFORGE_MEMORY_BUDGET "
                                       "caps what an evaluation may use)")
            if result is None or result.get("status") != "ok":
                why, hint = _reference_death(outcome, written, len(plan.all_cases()))
                if result:  # it said why itself: the spec's own failure
                    why = result.get("reason")
                raise KforgeError(f"the reference for kernel {spec.name!r} failed on {target}: {why}",
                                  path=Path(spec.root) / spec.kernel_file, hint=hint)
            try:
                loaded = {case.ref_file: outputs.load(folder, case.ref_file, outcome.shared)
                          for case in plan.fitted(_fit(result)).all_cases()}
            except (OSError, ValueError, devshare.DeviceShareError) as exc:
                raise KforgeError(f"the reference's outputs for kernel {spec.name!r} could not be read back: {exc}",
                                  path=Path(spec.root) / spec.kernel_file,
                                  hint="run `kforge-bot doctor`; KFORGE_OUTPUTS=files passes outputs through the "
                                       "host instead of sharing device memory") from None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            if outcome is not None and outcome.shared is not None:
                outcome.shared.close()
        return loaded, result

    def cleanup(self) -> None:
        with self._lock:
            self._done.clear()  # outputs held as device memory are unmapped once their tensors are gone
        if self._own:
            shutil.rmtree(self.root, ignore_errors=True)


def _fit(ref_result: dict[str, Any]) -> Fit:
    """The seeds and timed sets the reference kept for its problem's size (plan.fit_plan)."""
    return Fit.from_dict(ref_result.get("fit") or {})


def _raise_on_sandbox_failure(outcome: ChildOutcome) -> None:
    failure = outcome.sandbox_failure
    if failure:
        raise KforgeError(f"the sandbox could not start a worker: {failure}",
                          hint="run `kforge-bot doctor` to see what the sandbox needs here, or set policy "
                               "isolation: off on a machine you trust")


def _reference_death(outcome: ChildOutcome, written: list[dict[str, Any]], cases: int) -> tuple[str, str]:
    """Why a reference's worker died without a word, and the fix. Killed by SIGKILL with gigabytes written is
    the host's memory running out (every case's outputs pass through it), not the reference's code."""
    last = [ln for ln in outcome.log_tail.splitlines() if ln.strip()][-1:]
    why = outcome.exit_description() + (f"; its last words: {last[0][:300]}" if last else "")
    out_bytes = sum(int(m.get("output_bytes") or 0) for m in written)
    if outcome.returncode == -9 and not outcome.timed_out and out_bytes > 1 << 30:
        host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        per_case = out_bytes / max(1, len(written))
        why = (f"its worker was killed (SIGKILL) after {len(written)} of {cases} cases had written "
               f"{out_bytes / 1e9:.1f} GB of outputs ({per_case / 1e9:.1f} GB a case) on a host with "
               f"{host / 1e9:.0f} GB of memory: most likely out of host memory, not a fault of the reference")
        return why, (f"every case's outputs pass through host memory ({cases} cases need about "
                     f"{cases * per_case * 2 / 1e9:.0f} GB); use fewer seeds (--seeds 1) or a smaller shape set")
    return why, "the reference and its inputs must run before any candidate can be judged"


def _import_torch_meanwhile(target: str) -> None:
    """Start importing torch (seconds) in a thread while the reference's child runs, and on a GPU target set up
    this process's device context (a second more): this process needs both only to compare the outputs, and
    waiting for them after the children had been pure loss."""
    if "torch" not in sys.modules or target.startswith("cuda"):
        threading.Thread(target=_prepare_comparison, args=(target,), name="kforge-import-torch", daemon=True).start()


def _prepare_comparison(target: str) -> None:
    torch = importlib.import_module("torch")
    if target.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.init()
        # The comparison's kernels load on their first use (tens of milliseconds each, a dozen kinds): load them
        # now, on a few elements, while the workers run. Any failure here shows again, properly, when comparing.
        try:
            from kforge_bot.evaluate.checks import compare_tensor

            for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int64):
                sample = torch.arange(8, device=target).to(dtype)
                compare_tensor(0, sample, sample.clone(), None, target)
            torch.cuda.synchronize(target)
        except Exception:  # noqa: BLE001 - an optimisation only
            pass


def new_seeds(count: int) -> list[int]:
    """Fresh secret seeds per evaluation, 63 bits each (too many to find by trying seeds against the inputs a
    candidate sees): a candidate cannot be tuned to a fixed set of inputs, nor rebuild the timed ones."""
    return [secrets.randbits(63) for _ in range(count)]


def evaluate(
    spec: KernelSpec,
    candidate: Implementation,
    target: str = "auto",
    settings: EvalSettings | None = None,
    *,
    baseline: Implementation | None = None,
    seeds: list[int] | None = None,
    references: ReferenceStore | None = None,
    progress: Progress | None = None,
    spares: SpareWorkers | None = None,
) -> EvalResult:
    settings = settings or EvalSettings()
    target_name = resolve_target_name(target, spec.targets)
    baseline = baseline or spec.baseline
    seeds = seeds or new_seeds(settings.seeds or spec.seeds)

    findings = static_findings(candidate.source)
    if findings:
        return EvalResult(verdict="rejected", target=target_name,
                          reason=f"static check: {findings[0]}" + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""),
                          details={"static_findings": [str(f) for f in findings]})

    store = references or ReferenceStore()
    # The sandbox's view less its scratch: one lookup of the folders it shows, for this evaluation's worker, the
    # key a spare must match, and the next spare.
    template = sandbox_view(spec, [candidate, baseline], target_name, Path("/scratch"), settings)
    key = json.dumps([target_name, None if template is None else
                      [sorted(map(str, template.readable)), sorted(map(str, template.writable)), template.devices]])
    spare = spares.take(key) if spares is not None else None
    # The next spare: on a GPU, started now and held off the device until this timing is over (spares.py).
    spare_early = spares is not None and target_name.split(":")[0] != "cpu"
    if spare_early:
        spares.prepare(key, lambda: _start_spare(template, target_name, spares.root, hold_device=True))
    work = spare.work if spare is not None else Path(tempfile.mkdtemp(prefix="kforge-eval-", dir=_scratch_root()))
    started = time.monotonic()
    clock = [started]

    def lap() -> float:
        now = time.monotonic()
        spent, clock[0] = now - clock[0], now
        return round(spent, 3)

    try:
        # The candidate's worker starts now and imports torch while the reference runs. Sandboxed, it cannot
        # see the reference's files, so it gets its plan at once and imports and builds the candidate meanwhile
        # (compilers included); unsandboxed, only after the reference's outputs are read back and deleted.
        # Either way it makes its first call only after the reference has finished and sent its Fit.
        view = None if template is None else replace(template, scratch=work)
        worker = spare.worker if spare is not None else start_worker(work, "candidate", view=view, warm=target_name)
        full = Plan(role="candidate", target=target_name, spec=spec, baseline=baseline, candidate=candidate,
                    settings=settings, seeds=seeds, out_dir=work, await_fit=True)
        try:
            if view is not None:
                worker.send(full.to_dict(), more=True)
            ref_outputs, ref_result = store.ensure(spec, target_name, seeds, settings, progress)
            parent = {"reference_s": lap()}  # about 0 when an earlier candidate's reference run is reused
            fit = _fit(ref_result)
            if view is None:
                worker.send(full.to_dict(), more=True)
            worker.send_last(fit.to_dict())
            plan = full.fitted(fit)
            seeds = plan.seeds
            stall_s = max(settings.stall_floor_s, STALL_FACTOR * float(ref_result.get("slowest_case_s") or 0.0))
            outcome = worker.run(None, settings.timeout_s, on_message=progress, stall_s=stall_s)
            _raise_on_sandbox_failure(outcome)
            parent["candidate_worker_s"] = lap()
        finally:
            worker.discard()
        try:
            result = _judge(plan, outcome, ref_outputs, ref_result)
        finally:
            if outcome.shared is not None:
                outcome.shared.close()
        parent["compare_s"] = lap()
        parent["total_s"] = round(time.monotonic() - started, 3)
        message = outcome.result or {}
        # Where an evaluation's wall time goes: the parent's three steps, and each worker's own phases.
        result.details["phases"] = {"parent": parent, "reference_worker": ref_result.get("phases") or {},
                                    "candidate_worker": message.get("phases") or {}, "no_progress_limit_s": stall_s,
                                    "worker_started_early": spare is not None}
        if fit.note:  # a large problem: fewer seeds and timed sets than asked, and why
            result.details["memory_fit"] = fit.to_dict()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if references is None:
            store.cleanup()
    result.details.setdefault("seeds", seeds)
    if spare_early:  # timing is over: the spare may make its device context now
        spares.release()
    elif spares is not None:  # the CPU: the next candidate's worker starts only now, while the caller moves on
        spares.prepare(key, lambda: _start_spare(template, target_name, spares.root))
    return result


def _start_spare(template: isolation.View | None, target: str, root: Path | None,
                 hold_device: bool = False) -> tuple[WorkerProcess, Path]:
    work = Path(tempfile.mkdtemp(prefix="kforge-eval-", dir=root or _scratch_root()))
    view = None if template is None else replace(template, scratch=work)
    return start_worker(work, "candidate", view=view, warm=target, hold_device=hold_device), work


# ------------------------------------------------------------------------------------------- judging


def _judge(plan: Plan, outcome: ChildOutcome, ref_outputs: dict[str, list[Any]],
           ref_result: dict[str, Any]) -> EvalResult:
    base = EvalResult(verdict="crash", reason="", target=plan.target,
                      device_name=ref_result.get("device_name", ""), target_info=ref_result.get("target_info", {}))
    base.details = {"wall_s": round(outcome.wall_s, 3), "log_tail": outcome.log_tail[-4000:],
                    "isolation": isolation.probe().describe() if outcome.sandboxed else "not sandboxed"}
    if ref_result.get("input_bytes") is not None:
        base.details["input_bytes"] = ref_result["input_bytes"]  # per shape set, tensors only
    if outcome.forged_lines:
        base.details["forged_lines"] = outcome.forged_lines
    message = outcome.result
    if outcome.flooded:
        base.verdict, base.reason = "rejected", f"the candidate {outcome.exit_description()}"
        return base
    if outcome.timed_out:
        base.verdict, base.reason = "timeout", f"the candidate {outcome.exit_description()}"
        return base
    if message is None:
        if outcome.returncode == 0:
            base.verdict = "rejected"
            base.reason = "the candidate's process exited before the harness finished (early exit)"
            if outcome.forged_lines:
                base.reason += f" after writing {outcome.forged_lines} unsigned line(s) to the result channel"
        else:
            base.reason = f"the candidate's process {outcome.exit_description()}"
        return base
    status = message.get("status")
    if status != "ok":
        base.verdict = status if status in ("compile_error", "crash", "rejected", "incorrect") else "crash"
        base.reason = message.get("reason", "")
        base.details["traceback"] = message.get("detail", "")
        return base

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
    correctness = _compare_all(plan, ref_outputs, timed=bool(message.get("timing")), shared=outcome.shared)
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
        _attach_timing(base, timing, plan.settings.confidence)
        broken = _physical_bound(base, plan, ref_outputs, ref_result)
        if broken:
            base.verdict, base.reason = "rejected", broken
            base.speedup = base.speedup_ci = None
            return base
        if base.speedup_ci is not None:
            base.reason = (f"correct on every case; {base.speedup:.3f}x "
                           f"(CI {base.speedup_ci[0]:.3f}-{base.speedup_ci[1]:.3f})")
        elif base.speedup is not None:
            base.reason = f"correct on every case; {base.speedup:.3f}x ({base.details['speedup_ci_note']})"
    return base


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
    found = bound.floors(plan.target.split(":")[0], result.device_name, info.get("l2_bytes"), traffic, calls,
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
                 shared: outputs.SharedOutputs | None = None) -> dict[str, Any]:
    from kforge_bot.evaluate.checks import compare_outputs, comparison_device  # imports torch (see module doc)

    records: list[dict[str, Any]] = []
    tolerance = plan.spec.tolerance
    device = comparison_device(plan.target)
    handed_over = shared.names() if shared is not None else set()
    via: set[str] = set()  # how the candidate's outputs came back

    def saved(name: str) -> bool:
        return name in handed_over or (plan.out_dir / name).is_file()

    def check(case: Case, cand_file: str, ref_file: str, label: str) -> str | None:
        if not saved(cand_file):
            return f"rejected|{label}: the candidate's process produced no output for this case"
        via.add("device memory" if cand_file in handed_over else "files")
        try:
            cand = outputs.load(plan.out_dir, cand_file, shared)
        except Exception as exc:  # noqa: BLE001 - a forged or truncated output is the candidate's problem
            return f"rejected|{label}: unreadable output ({type(exc).__name__}: {str(exc)[:200]})"
        finally:
            (plan.out_dir / cand_file).unlink(missing_ok=True)  # compared once; outputs must not pile up
        ref = ref_outputs[ref_file]
        per_output = compare_outputs(cand, ref, tolerance, device)
        del cand
        records.append({"case": label, "shape_set": case.shape, "seed": case.seed, "outputs": per_output})
        bad = next((o for o in per_output if not o["ok"]), None)
        return f"incorrect|{label}: output {bad['index']}: {bad['problem']}" if bad else None

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
    if failure is None:
        for case in plan.timing_cases():
            if not saved(case.cand_file):
                continue  # a very slow kernel may not reach every rotated set; the ones it did are checked
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
        "checks": ["shape and dtype", "NaN/Inf", "elementwise atol/rtol", "relative norm", "non-constant",
                   "inputs unchanged", "no aliasing", "plain tensors", "same buffers new values",
                   "earlier outputs not overwritten", "timed outputs", "one element of each timed input set changed",
                   "values moved between timed buffers"],
        "records": records,
    }
    if failure:
        summary["status"], summary["reason"] = failure.split("|", 1)
    return summary


def _profile_rejection(plan: Plan, profile: dict[str, Any]) -> str | None:
    cand = profile.get("candidate") or {}
    if cand.get("side_stream_kernels"):
        names = ", ".join(cand["side_stream_kernels"][:3])
        return (f"the candidate launched kernels on a side stream ({names}); work outside the current stream "
                "escapes the timed region")
    if plan.settings.allow_framework_fallback or plan.candidate == plan.baseline:
        return None  # an A/A run (the same code on both sides) measures the harness's noise, not a kernel
    ref_ops = set((profile.get("reference") or {}).get("compute_ops") or [])
    cand_ops = set(cand.get("compute_ops") or [])
    if ref_ops and ref_ops <= cand_ops:
        return (f"the candidate still calls every framework op the reference uses ({', '.join(sorted(ref_ops)[:4])}):"
                " it falls back to the framework instead of replacing it (policy allow_framework_fallback: false)")
    return None


def _attach_timing(result: EvalResult, timing: list[dict[str, Any]], confidence: float) -> None:
    per_shape = []
    pooled_b: list[float] = []
    pooled_c: list[float] = []
    usable = [t for t in timing if t.get("baseline_ms") and t.get("candidate_ms")]
    if not usable:
        return
    n_min = min(len(t["baseline_ms"]) for t in usable)
    floors: list[float] = []
    for t in usable:
        b, c = t["baseline_ms"], t["candidate_ms"]
        speedup, ci = speedup_from_pairs(b, c, confidence)
        floor = systematic_floor(t.get("calls_per_sample", 1))
        floors.append(floor)
        per_shape.append({"shape_set": t["shape"], "baseline": summarize(b).to_dict(),
                          "candidate": summarize(c).to_dict(), "speedup": speedup,
                          "speedup_ci": list(widen(ci, floor)) if math.isfinite(ci[0]) else None,
                          "speedup_ci_within_run": list(ci) if math.isfinite(ci[0]) else None,
                          "systematic_floor": floor,
                          "pairs": len(b), "calls_per_sample": t.get("calls_per_sample", 1),
                          "stop_reason": t.get("stop_reason", ""), "wall_s": t.get("wall_s"),
                          "mode": t.get("mode", "eager"), "mode_note": t.get("mode_note", "")})
        # Each shape set weighs the same in the pooled figure, however many pairs it took.
        step = len(b) / n_min
        idx = [int(i * step) for i in range(n_min)]
        pooled_b.extend(b[i] for i in idx)
        pooled_c.extend(c[i] for i in idx)
    speedup, ci = speedup_from_pairs(pooled_b, pooled_c, confidence)
    result.speedup, result.speedup_ci = speedup, widen(ci, max(floors))
    result.details["speedup_ci_within_run"] = list(ci) if math.isfinite(ci[0]) else None
    result.details["systematic_floor"] = max(floors)
    if not math.isfinite(ci[0]):
        # The range of a handful of pairs is no 95% interval: report none rather than an overconfident one.
        result.speedup_ci = None
        result.details["speedup_ci_note"] = (f"too few pairs ({len(pooled_b)}) for a {confidence:.1%} confidence "
                                             "interval; give it more time")
    b_stats = [summarize(t["baseline_ms"]) for t in usable]
    c_stats = [summarize(t["candidate_ms"]) for t in usable]
    result.baseline = _sum_stats(b_stats)
    result.candidate = _sum_stats(c_stats)
    result.details["timing"] = per_shape
    result.details["confidence"] = confidence


def _sum_stats(stats: list[TimingStats]) -> TimingStats:
    """One call on every shape set: medians and quartiles add up per shape set."""
    return TimingStats(
        median_ms=sum(s.median_ms for s in stats),
        q1_ms=sum(s.q1_ms for s in stats),
        q3_ms=sum(s.q3_ms for s in stats),
        min_ms=sum(s.min_ms for s in stats),
        samples=sum(s.samples for s in stats),
    )
