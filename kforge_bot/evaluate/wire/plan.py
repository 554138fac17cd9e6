"""What one evaluation will run: decided by the parent, handed to workers as JSON.

The parent fixes the seeds and the file every output must land in, so it knows what to expect back and
never takes a worker's word for which cases exist.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kforge_bot.evaluate.wire import heldout
from kforge_bot.evaluate.wire.limits import Limits
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec
from kforge_bot.targets import target_kind


@dataclass(frozen=True)
class Case:
    shape: int
    seed: int
    ref_file: str
    cand_file: str
    label: str
    reuse_seed: int | None = None  # run again with this seed's values written into the same buffers
    reuse_file: str | None = None
    reuse_ref_file: str | None = None
    perturbed: bool = False  # the seed's inputs with elements overwritten (checks.perturb_elements)
    variant: dict[str, Any] | None = None  # a held-out variant's (heldout.Variant.to_dict): checked, never timed


@dataclass
class Plan:
    role: str  # "reference" | "candidate"
    target: str
    spec: KernelSpec
    baseline: Implementation
    candidate: Implementation | None
    settings: EvalSettings
    seeds: list[int]
    out_dir: Path
    init_seed: int = 0
    threads: int = 0
    # The candidate's worker gets its plan while the reference still runs (sandboxed, it cannot see the
    # reference's files): it imports and builds, then waits for one line, the Fit, before its first call.
    await_fit: bool = False
    limits: Limits | None = None  # what the worker sets on itself before any user code runs (evaluate.wire.limits)
    # The held-out variants as the reference settled them (Fit.heldout); None until it has (evaluate.wire.heldout).
    heldout: tuple[dict[str, Any], ...] | None = None
    # Where base and head each have a worker (evaluate.side_workers): which one this worker holds ("candidate":
    # the head, "baseline": the base, whose correctness is not checked and whose failures are its own), its
    # `baseline` then the reference (the weights' source), and its timing served to the parent
    # (evaluate.worker.sample_server). "": both sides in this worker, timed here (measure_pair).
    side: str = ""
    # The head's worker imports none of the base's files (issue 38): where the reference or the inputs come from
    # another checkout than the candidate's, the reference's worker records its inputs, constructor arguments and
    # weights as files (evaluate.worker.shipped_inputs) and the head's worker gets each from the parent when it
    # needs it. Set on the reference's plan (it records) and the head's (it asks), never the base's.
    ship_inputs: bool = False

    def heldout_forms(self) -> list[list[heldout.Variant]]:
        """Each held-out variant's forms, in the order the reference tries them (none where the settings say so)."""
        if not self.settings.heldout:
            return []
        sizes = heldout.module_sizes(self.spec.inputs_source.source) if self.spec.format == "kernelbench" else None
        return heldout.draw(self.spec.shape_sets, self.seeds, globals_sizes=sizes, constraints=self.spec.constraints)

    def heldout_case(self, variant: heldout.Variant) -> Case:
        return Case(shape=variant.base, seed=variant.seed, ref_file=f"ref_h{variant.index}.out",
                    cand_file=f"cand_h{variant.index}.out", label=variant.label, variant=variant.to_dict())

    def heldout_cases(self) -> list[Case]:
        """The variants the reference ran (skipped ones are not cases)."""
        variants = [heldout.Variant.from_dict(v) for v in self.heldout or ()]
        return [self.heldout_case(v) for v in variants if not v.skipped]
    also: list[KernelSpec] = field(default_factory=list)  # role "imports": more kernels imported in the same worker

    def correctness_cases(self) -> list[Case]:
        cases = []
        for s in range(len(self.spec.shape_sets)):
            for i, seed in enumerate(self.seeds):
                reuse = i == 0 and len(self.seeds) > 1
                cases.append(Case(
                    shape=s, seed=seed, ref_file=f"ref_{s}_{i}.out", cand_file=f"cand_{s}_{i}.out",
                    label=f"shape set {s} {self.spec.shape_sets[s] or ''} seed {seed}".replace("  ", " "),
                    reuse_seed=self.seeds[1] if reuse else None,
                    reuse_file=f"cand_{s}_{i}_reuse.out" if reuse else None,
                    reuse_ref_file=f"ref_{s}_1.out" if reuse else None,
                ))
        return cases

    def timing_seed(self, shape: int, rotation: int) -> int:
        """A timed input set's seed: keyed by every correctness seed (fresh secrets per evaluation), so knowing
        the formula, or one seed, predicts nothing; distinct from the correctness seeds, so timed outputs are
        checked on inputs never seen before."""
        key = b"".join(s.to_bytes(8, "little", signed=True) for s in self.seeds)
        digest = hashlib.blake2b(f"timing {shape} {rotation}".encode(), key=key[-64:], digest_size=8).digest()
        return int.from_bytes(digest, "little") >> 1

    def timed_cand_file(self, shape: int, rotation: int) -> str:
        return f"cand_t{shape}_{rotation}.out"

    def timed_ref_file(self, shape: int, rotation: int) -> str:
        return f"ref_t{shape}_{rotation}.out"

    def timing_cases(self) -> list[Case]:
        if not self.settings.measure:
            return []
        return [Case(shape=s, seed=self.timing_seed(s, r), ref_file=self.timed_ref_file(s, r),
                     cand_file=self.timed_cand_file(s, r), label=f"timed run, shape set {s}, input set {r}")
                for s in self.spec.timed_indices() for r in range(self.settings.rotate_sets)]

    def moved_cand_file(self, shape: int, rotation: int) -> str:
        return f"cand_t{shape}_{rotation}_moved.out"

    def moved_cases(self) -> list[Case]:
        """After timing, input set r+1's values sit in input set r's buffers: the result must follow the values."""
        rotations = self.settings.rotate_sets
        if not self.settings.measure or rotations < 2:
            return []
        return [Case(shape=s, seed=self.timing_seed(s, (r + 1) % rotations),
                     ref_file=self.timed_ref_file(s, (r + 1) % rotations), cand_file=self.moved_cand_file(s, r),
                     label=f"after timing, shape set {s}: input set {(r + 1) % rotations}'s values in input set "
                           f"{r}'s buffers")
                for s in self.spec.timed_indices() for r in range(rotations)]

    def changed_cases(self) -> list[Case]:
        """After timing, each input set's values with elements changed, in its own buffers (before the
        values move): a result cached by buffer or by a sample of the values (the timed sets repeat) answers
        with the unchanged inputs' result."""
        if not self.settings.measure:
            return []
        return [Case(shape=s, seed=self.timing_seed(s, r), ref_file=f"ref_c{s}_{r}.out", cand_file=f"cand_c{s}_{r}.out",
                     label=f"after timing, shape set {s}: input set {r} with elements changed", perturbed=True)
                for s in self.spec.timed_indices() for r in range(self.settings.rotate_sets)]

    def all_cases(self) -> list[Case]:
        return self.correctness_cases() + self.heldout_cases() + self.timing_cases() + self.changed_cases()

    def candidate_outputs(self) -> int:
        """How many output files the candidate's worker writes (each compared, then deleted, at the end)."""
        reuse = sum(1 for c in self.correctness_cases() if c.reuse_file)
        return len(self.correctness_cases()) + reuse + len(self.heldout_cases()) + len(self.timing_cases()) \
            + len(self.changed_cases()) + len(self.moved_cases())

    def fitted(self, fit: Fit) -> Plan:
        """This plan with the fit's seeds and timed sets (fewer for a large problem, more timed sets for a short
        kernel's), or itself when they are its own. A count of 0 keeps the plan's."""
        most = max(self.settings.rotate_sets, self.settings.short_kernel_sets)
        if not (0 <= fit.seeds <= len(self.seeds) and 0 <= fit.rotate_sets <= most):
            raise ValueError(f"a fit of {fit.seeds} seed(s) and {fit.rotate_sets} timed set(s) is not one of this "
                             f"plan's ({len(self.seeds)} seeds, at most {most} timed sets)")
        seeds = fit.seeds or len(self.seeds)
        rotations = fit.rotate_sets or self.settings.rotate_sets
        held = self.heldout if fit.heldout is None else fit.heldout
        if seeds == len(self.seeds) and rotations == self.settings.rotate_sets and held == self.heldout:
            return self
        return replace(self, seeds=self.seeds[:seeds], settings=replace(self.settings, rotate_sets=rotations),
                       heldout=held)

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "target": self.target,
            "spec": self.spec.to_dict(),
            "baseline": self.baseline.to_dict(),
            "candidate": self.candidate.to_dict() if self.candidate else None,
            "settings": self.settings.to_dict(),
            "seeds": self.seeds,
            "out_dir": str(self.out_dir),
            "init_seed": self.init_seed,
            "threads": self.threads,
            "await_fit": self.await_fit,
            "limits": self.limits.to_dict() if self.limits else None,
            "heldout": None if self.heldout is None else list(self.heldout),
            "also": [s.to_dict() for s in self.also],
            "side": self.side,
            "ship_inputs": self.ship_inputs,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        return cls(
            role=data["role"],
            target=data["target"],
            spec=KernelSpec.from_dict(data["spec"]),
            baseline=Implementation.from_dict(data["baseline"]),
            candidate=Implementation.from_dict(data["candidate"]) if data.get("candidate") else None,
            settings=EvalSettings.from_dict(data["settings"]),
            seeds=list(data["seeds"]),
            out_dir=Path(data["out_dir"]),
            init_seed=data.get("init_seed", 0),
            threads=data.get("threads", 0),
            await_fit=bool(data.get("await_fit", False)),
            limits=Limits.from_dict(data["limits"]) if data.get("limits") else None,
            heldout=None if data.get("heldout") is None else tuple(data["heldout"]),
            also=[KernelSpec.from_dict(s) for s in data.get("also") or ()],
            side=str(data.get("side") or ""),
            ship_inputs=bool(data.get("ship_inputs", False)),
        )


# ------------------------------------------------------------------------------------- memory budget

DEVICE_SHARE = 0.8  # of the device memory free when the reference starts
HOST_SHARE = 0.7  # of the host memory available
# A GPU call moving fewer bytes (inputs and outputs of one set) may be shorter than a third of a timing sample
# (timing.MIN_SAMPLE_MS, 0.2 ms: 500 MB is 62 us at a B200's 8 TB/s). Such calls are timed from CUDA graphs several
# a sample, each on its own input set (a second replay of one set's graph could return the first one's answer), so
# they get settings.short_kernel_sets timed sets: with 2, a 25 us kernel's samples held 2 calls and caught a 1%
# slowdown in 3 of 5 H200 runs. Larger problems keep settings.rotate_sets (more would only cost time after timing).
SHORT_KERNEL_BYTES = 500 * 10**6


@dataclass(frozen=True)
class Fit:
    """How many seeds and timed input sets an evaluation keeps, given the sizes the reference measured, and
    whether its saved outputs may stay on the device (evaluate.wire.outputs) or must go through the host."""

    seeds: int  # 0: the plan's own
    rotate_sets: int  # 0: the plan's own
    note: str = ""  # why it was cut down; empty when the full plan fits
    device_outputs: bool = True
    # The inputs the reference's outputs lie in (GPU MODE's data carries the output buffer): output buffers, which
    # a candidate's output may be and every call writes. Measured by the trusted reference, never the candidate.
    output_slots: tuple[int, ...] = ()
    # The held-out variants in the form the reference ran them, or skipped with why (heldout.Variant.to_dict).
    heldout: tuple[dict[str, Any], ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"seeds": self.seeds, "rotate_sets": self.rotate_sets, "note": self.note,
                "device_outputs": self.device_outputs, "output_slots": list(self.output_slots),
                "heldout": None if self.heldout is None else list(self.heldout)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fit:
        """A missing count keeps the plan's own (an older reference result, or no measurement at all)."""
        held = data.get("heldout")
        return cls(int(data.get("seeds") or 0), int(data.get("rotate_sets") or 0),
                   str(data.get("note") or ""), bool(data.get("device_outputs", True)),
                   tuple(int(i) for i in data.get("output_slots") or ()),
                   None if held is None else tuple(dict(v) for v in held))


class DoesNotFit(Exception):
    """Even one seed and one timed input set need more memory than the machine has."""


def memory_needs(plan: Plan, input_bytes: list[int], output_bytes: list[int],
                 device_outputs: bool = False) -> tuple[int, int]:
    """(device bytes, host bytes) an evaluation of `plan` holds at its peak, from each shape set's input and
    output sizes. Device: the head's worker keeps every timed input set, a copy of each (inputs must stay
    unchanged), the values moved between them, the correctness case's inputs, a copy and the second seed's
    values, and each timed set's output besides the live ones. The saved outputs (the reference's, held by
    the bot, and the candidate's, which wait for the comparison) stay on the device where they are handed over
    as device memory (`device_outputs`), else they travel as files in the host's memory-backed storage."""
    r = plan.settings.rotate_sets if plan.settings.measure else 0
    # Timed, base and head run in workers of their own (evaluate.side_workers): the base's, built and timed only,
    # holds its timed sets, their snapshots and fresh copies, and its timed outputs (`base`). On a CPU its peak
    # was 0.84x the head's (benchmarks/results/split_worker_memory_cpu.md); left out, KernelBench L1 33, 41 and 63
    # ran out of an H100's memory mid-timing. The parent's shipped recordings (at most
    # shipped_device.MAX_HELD_SHARE of the device) sit in the budget's margin (DEVICE_SHARE).
    base = 1 if plan.settings.measure else 0
    device = max((i * (3 * r + 3) + o * (r + 4) + base * (i * 3 * r + o * (r + 1))
                  for i, o in zip(input_bytes, output_bytes)), default=0)
    shapes = max(1, len(plan.spec.shape_sets))
    per_shape = (len(plan.all_cases()) + plan.candidate_outputs()) / shapes
    saved = int(sum(o * per_shape for o in output_bytes))
    if device_outputs:
        return device + saved, 0
    return device, saved + max(output_bytes, default=0)


def fit_plan(plan: Plan, input_bytes: list[int], output_bytes: list[int], device_free: int | None,
             host_free: int, device_outputs: bool = False) -> Fit:
    """The largest plan of the ladder (a small GPU problem's short-kernel timed sets, SHORT_KERNEL_BYTES; as
    asked; one seed and two timed sets; one of each) that fits in the
    budget; raises DoesNotFit naming the sizes and the memory when none does. `device_free` None: the device
    is the host (CPU, or unified memory), and both needs come out of the host's memory. `device_outputs`: the
    saved outputs can stay on the device, and the whole ladder is tried that way first, then with them in
    host memory: the host path costs seconds a gigabyte (a 6.4 GB KernelBench problem: 8 s against 67 s on an
    H200), and one timed set keeps every check but the values moved between sets (the changed element still
    catches a result cached by buffer or by values). A 7.5 GB problem fits only with its outputs on the host."""
    seeds, rotations = len(plan.seeds), plan.settings.rotate_sets
    short = target_kind(plan.target) == "cuda" and plan.settings.short_kernel_sets > rotations and \
        max((i + o for i, o in zip(input_bytes, output_bytes)), default=0) <= SHORT_KERNEL_BYTES
    asked = (seeds, rotations)  # what the settings ask for: fewer is a cut the note explains
    ladder = ([(seeds, plan.settings.short_kernel_sets)] if short else []) + \
        [asked, (1, min(2, rotations)), (1, 1)]
    device_budget = None if device_free is None else int(device_free * DEVICE_SHARE)
    host_budget = int(host_free * HOST_SHARE)
    needs = (0, 0)
    for on_device in ((True, False) if device_outputs else (False,)):
        for kept in ladder:
            needs = memory_needs(plan.fitted(Fit(*kept)), input_bytes, output_bytes, on_device)
            device_need, host_need = needs
            fits = host_need + (device_need if device_budget is None else 0) <= host_budget and \
                (device_budget is None or device_need <= device_budget)
            if fits:
                note = _fit_note(plan, kept, kept[0] >= asked[0] and kept[1] >= asked[1], input_bytes,
                                 output_bytes, device_budget is None, device_outputs, on_device)
                return Fit(*kept, note, device_outputs=on_device)
    raise DoesNotFit(
        f"inputs of {_gb(max(input_bytes))} and outputs of {_gb(max(output_bytes))} per set need "
        + _needs_text(needs, device_budget is None) + " even with one seed and one timed input set; this machine "
        + ("has " if device_budget is None else f"has {_gb(device_free or 0)} of device memory free and ")
        + f"{_gb(host_free)} of host memory available")


def _fit_note(plan: Plan, kept: tuple[int, int], full: bool, input_bytes: list[int], output_bytes: list[int],
              unified: bool, device_outputs: bool, on_device: bool) -> str:
    """Why the plan was cut down, and where the outputs go when the device cannot keep them; empty otherwise."""
    notes = []
    if not full:
        notes.append(f"cut to {kept[0]} seed(s) and {kept[1]} timed input set(s) to fit in memory: inputs "
                     f"{_gb(max(input_bytes))}, outputs {_gb(max(output_bytes))} per set; the full plan needs "
                     + _needs_text(memory_needs(plan, input_bytes, output_bytes, on_device), unified))
    if device_outputs and not on_device:
        notes.append("outputs pass through host memory (too large to keep on the device)")
    return "; ".join(notes)


def _needs_text(needs: tuple[int, int], unified: bool) -> str:
    device, host = needs
    return f"about {_gb(device + host)} of memory" if unified else \
        f"about {_gb(device)} of device memory and {_gb(host)} of host memory"


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"
