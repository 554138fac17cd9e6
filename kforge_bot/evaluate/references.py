"""Reference outputs: computed once per (spec, target, seeds) by a worker running trusted code only, and kept
in the bot's memory for every candidate that is compared with them (kforge_bot.evaluate.api)."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.wire import devshare, outputs
from kforge_bot.evaluate.wire.limits import limits_for
from kforge_bot.evaluate.wire.plan import Fit, Plan
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.wire import shipped
from kforge_bot.evaluate.sandbox import WorkerOutcome, raise_on_sandbox_failure, run_worker, sandbox_view
from kforge_bot.evaluate.scratch import remove_scratch, scratch_root
from kforge_bot.kernelspec import KernelSpec

Progress = Callable[[dict[str, Any]], None]  # what an evaluation reports as it goes (one name everywhere)
REFERENCE_TIMEOUT_S = 600.0


class ReferenceStore:
    """Reference outputs computed once per (spec, target, seeds) and reused by every candidate.

    They are kept in this (the parent's) memory, and the reference worker's files are deleted as soon as
    they are read: a candidate runs as the same user and could otherwise simply load the expected outputs
    from disk.
    """

    def __init__(self, root: Path | None = None) -> None:
        self._own = root is None
        self.root = Path(tempfile.mkdtemp(prefix="kforge-ref-", dir=scratch_root())) if root is None else root
        self._done: dict[str, tuple[dict[str, list[Any]], dict[str, Any]]] = {}
        # Recorded inputs the reference's worker handed over as device memory (evaluate.wire.shipped_device), by
        # key: {file name: (the allocation mapped here, its header)}.
        self._on_device: dict[str, dict[str, tuple[Any, list[Any]]]] = {}
        self._lock = threading.Lock()  # evaluations in threads share a store: one reference run per key

    def key(self, spec: KernelSpec, target: str, seeds: list[int], settings: EvalSettings, ship: bool = False) -> str:
        material = json.dumps([spec.reference.to_dict(), spec.inputs_source.to_dict(), spec.inputs_symbol,
                               spec.init_symbol, spec.init_kwargs, list(spec.shape_sets), target, seeds,
                               settings.measure, settings.heldout, settings.rotate_sets, settings.short_kernel_sets,
                               ship], sort_keys=True, default=str)
        return hashlib.sha256(material.encode()).hexdigest()[:16]

    def ensure(self, spec: KernelSpec, target: str, seeds: list[int], settings: EvalSettings,
               progress: Progress | None, ship: bool = False) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        """(reference outputs by file name, the reference worker's result message). `ship`: the reference's
        worker records its inputs for a head's worker that imports none of its files (Plan.ship_inputs); the
        folder they are kept in is shipped_folder(...)."""
        key = self.key(spec, target, seeds, settings, ship)
        with self._lock:
            if key not in self._done:
                self._done[key] = self._compute(key, spec, target, seeds, settings, progress, ship)
            return self._done[key]

    def shipped_folder(self, spec: KernelSpec, target: str, seeds: list[int], settings: EvalSettings) -> Path:
        """Where the recorded inputs of ensure(..., ship=True) are kept, out of every worker's view."""
        return self.root / f"{self.key(spec, target, seeds, settings, True)}-shipped"

    def shipped_on_device(self, spec: KernelSpec, target: str, seeds: list[int],
                          settings: EvalSettings) -> dict[str, tuple[Any, list[Any]]]:
        """The recorded inputs of ensure(..., ship=True) that are kept as device memory rather than files."""
        return self._on_device.get(self.key(spec, target, seeds, settings, True), {})

    def _compute(self, key: str, spec: KernelSpec, target: str, seeds: list[int], settings: EvalSettings,
                 progress: Progress | None, ship: bool) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        _import_torch_meanwhile(target)
        folder = self.root / key
        view = sandbox_view(spec, [], target, folder, settings)
        plan = Plan(role="reference", target=target, spec=spec, baseline=spec.reference, candidate=None,
                    settings=settings, seeds=seeds, out_dir=folder, ship_inputs=ship,
                    limits=limits_for(settings, target, view is not None, str(scratch_root())))
        folder.mkdir(parents=True, exist_ok=True)
        written: list[dict[str, Any]] = []  # the reference's progress: how far it got, and how much it wrote

        def on_message(message: dict[str, Any]) -> None:
            if message.get("phase") == "reference":
                written.append(message)
            if progress is not None:
                progress(message)

        outcome = None
        try:
            outcome = run_worker(plan.to_dict(), folder, REFERENCE_TIMEOUT_S, on_message=on_message, view=view)
            raise_on_sandbox_failure(outcome)
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
                          for case in plan.fitted(reference_fit(result)).all_cases()}
            except (OSError, ValueError, devshare.DeviceShareError) as exc:
                raise KforgeError(f"the reference's outputs for kernel {spec.name!r} could not be read back: {exc}",
                                  path=Path(spec.root) / spec.kernel_file,
                                  hint="run `kforge-bot doctor`; KFORGE_OUTPUTS=files passes outputs through the "
                                       "host instead of sharing device memory") from None
            if ship:  # kept for the heads this reference serves; every file they ask for is linked from here
                kept = self.root / f"{key}-shipped"
                if (folder / shipped.FOLDER).is_dir():
                    os.replace(folder / shipped.FOLDER, kept)
                else:  # nothing recorded (a reference that records nothing): every head's request is answered "none"
                    kept.mkdir(exist_ok=True)
                if outcome.shared is not None:
                    self._on_device[key] = outcome.shared.take_whole(shipped.valid_name)
        finally:
            remove_scratch(folder)
            if outcome is not None and outcome.shared is not None:
                outcome.shared.close()
        return loaded, result

    def cleanup(self) -> None:
        with self._lock:
            self._done.clear()  # outputs held as device memory are unmapped once their tensors are gone
            self._on_device.clear()  # recorded inputs likewise
        if self._own:
            remove_scratch(self.root)
        else:
            for kept in self.root.glob("*-shipped"):
                remove_scratch(kept)


def reference_fit(ref_result: dict[str, Any]) -> Fit:
    """The seeds and timed sets the reference kept for its problem's size (plan.fit_plan)."""
    return Fit.from_dict(ref_result.get("fit") or {})


def _reference_death(outcome: WorkerOutcome, written: list[dict[str, Any]], cases: int) -> tuple[str, str]:
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
            from kforge_bot.evaluate.wire.checks import compare_tensor

            for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int64):
                sample = torch.arange(8, device=target).to(dtype)
                compare_tensor(0, sample, sample.clone(), None, target)
            torch.cuda.synchronize(target)
        except Exception:  # noqa: BLE001 - an optimisation only
            pass
