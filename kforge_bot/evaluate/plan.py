"""What one evaluation will run: decided by the parent, handed to workers as JSON.

The parent fixes the seeds and the file every output must land in, so it knows what to expect back and
never takes a worker's word for which cases exist.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_bot.evaluate.result import EvalSettings
from kforge_bot.spec import Implementation, KernelSpec


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
    perturbed: bool = False  # the seed's inputs with one element overwritten (checks.perturb_one)


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

    def correctness_cases(self) -> list[Case]:
        cases = []
        for s in range(len(self.spec.shape_sets)):
            for i, seed in enumerate(self.seeds):
                reuse = i == 0 and len(self.seeds) > 1
                cases.append(Case(
                    shape=s, seed=seed, ref_file=f"ref_{s}_{i}.pt", cand_file=f"cand_{s}_{i}.pt",
                    label=f"shape set {s} {self.spec.shape_sets[s] or ''} seed {seed}".replace("  ", " "),
                    reuse_seed=self.seeds[1] if reuse else None,
                    reuse_file=f"cand_{s}_{i}_reuse.pt" if reuse else None,
                    reuse_ref_file=f"ref_{s}_1.pt" if reuse else None,
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
        return f"cand_t{shape}_{rotation}.pt"

    def timed_ref_file(self, shape: int, rotation: int) -> str:
        return f"ref_t{shape}_{rotation}.pt"

    def timing_cases(self) -> list[Case]:
        if not self.settings.measure:
            return []
        return [Case(shape=s, seed=self.timing_seed(s, r), ref_file=self.timed_ref_file(s, r),
                     cand_file=self.timed_cand_file(s, r), label=f"timed run, shape set {s}, input set {r}")
                for s in range(len(self.spec.shape_sets)) for r in range(self.settings.rotate_sets)]

    def moved_cand_file(self, shape: int, rotation: int) -> str:
        return f"cand_t{shape}_{rotation}_moved.pt"

    def moved_cases(self) -> list[Case]:
        """After timing, input set r+1's values sit in input set r's buffers: the result must follow the values."""
        rotations = self.settings.rotate_sets
        if not self.settings.measure or rotations < 2:
            return []
        return [Case(shape=s, seed=self.timing_seed(s, (r + 1) % rotations),
                     ref_file=self.timed_ref_file(s, (r + 1) % rotations), cand_file=self.moved_cand_file(s, r),
                     label=f"after timing, shape set {s}: input set {(r + 1) % rotations}'s values in input set "
                           f"{r}'s buffers")
                for s in range(len(self.spec.shape_sets)) for r in range(rotations)]

    def changed_cases(self) -> list[Case]:
        """After timing, each input set's values with one element changed, in its own buffers (before the
        values move): a result cached by buffer or by a sample of the values (the timed sets repeat) answers
        with the unchanged inputs' result."""
        if not self.settings.measure:
            return []
        return [Case(shape=s, seed=self.timing_seed(s, r), ref_file=f"ref_c{s}_{r}.pt", cand_file=f"cand_c{s}_{r}.pt",
                     label=f"after timing, shape set {s}: input set {r} with one element changed", perturbed=True)
                for s in range(len(self.spec.shape_sets)) for r in range(self.settings.rotate_sets)]

    def all_cases(self) -> list[Case]:
        return self.correctness_cases() + self.timing_cases() + self.changed_cases()

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
        )
