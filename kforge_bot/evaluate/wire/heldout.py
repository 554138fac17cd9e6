"""Held-out variants: shapes and values a candidate is checked on but never timed, never shown, never listed.

A candidate that hard-codes the listed shapes (a reshape to them, a loop over 256-wide chunks) or that returns
something close to its input (a LayerNorm of standard-normal rows is close to the rows) passes every listed case.
So each evaluation also checks VARIANTS of the listed shape sets, drawn from its secret seed:

- every size moved to a nearby odd size (odd is never a multiple of 2, 8, 16 or 128), the batch once smaller
  (variant 0) and once larger (variant 1). A size below MIN_SIZE is a flag, an axis or a kernel width, and keeps
  its value (the batch excepted). Where the manifest constrains a size (`constraints:`, kforge_bot.kernelspec), the new
  size keeps to the constraint: an odd multiple of `multiple_of`, within `min`/`max`, or the listed value (`fixed`);
- the floating-point inputs scaled, offset and with a heavy tail (a few elements made much larger), so that
  outputs close to the inputs, or to any cheap function of them, are not an accident of `randn`.

Sizes are what the inputs callable reads: a manifest's and a GPU MODE problem's keyword sets, and a KernelBench
file's module-level integers that `get_inputs`/`get_init_inputs` read (overridden on the trusted modules while a
variant runs). The reference decides what it can run: each variant is tried as drawn, then with its batch alone
moved, each with the values changed and then without; the first the reference runs with finite outputs is the
one the candidate is checked on, and a variant the reference runs in no form is skipped, with its reason
(`Fit.heldout`), never counted against the candidate.

Pure functions over plain data: the parent labels the cases, and both workers apply the same variant.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from types import ModuleType
from typing import Any

VARIANTS = 2  # one with a smaller batch, one with a larger
MIN_SIZE = 4  # sizes below this are flags, axes or kernel widths: kept (but the batch's)
LABEL_PREFIX = "held-out variant"  # every held-out case's label starts so (optimize's generator is never told more)


@dataclass(frozen=True)
class Values:
    """How floating-point inputs are changed: x * scale + offset, then `tail` of the elements times `tail_factor`."""

    scale: float
    offset: float
    tail: float = 0.01
    tail_factor: float = 8.0

    def text(self) -> str:
        return f"inputs x{self.scale:.2f}{self.offset:+.2f}, {self.tail:.0%} of elements x{self.tail_factor:g}"


@dataclass(frozen=True)
class Variant:
    """One held-out case: the shape set it moves, its sizes (all of them, as the inputs callable takes them), where
    they go (`kwargs` of the inputs callable, or module `globals`), its values and its seed."""

    index: int
    base: int  # the listed shape set it moves
    sizes: dict[str, Any]
    where: str  # "kwargs" | "globals"
    seed: int
    values: Values | None = None
    moved: tuple[str, ...] = ()  # the sizes it changed
    skipped: str = ""  # why the reference could run it in no form (then it is never run on the candidate)
    attempts: tuple[str, ...] = field(default=())  # what the reference could not run, on the way to this form

    @property
    def label(self) -> str:
        """'held-out variant 1 (batch_size=67, dim=1001; inputs x2.50+0.70, ...) seed 123'."""
        sizes = ", ".join(f"{k}={self.sizes[k]}" for k in self.moved) or "listed sizes"
        values = f"; {self.values.text()}" if self.values else ""
        return f"{LABEL_PREFIX} {self.index} ({sizes}{values}) seed {self.seed}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["moved"], data["attempts"] = list(self.moved), list(self.attempts)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Variant:
        data = dict(data)
        data["values"] = Values(**data["values"]) if data.get("values") else None
        data["moved"] = tuple(data.get("moved") or ())
        data["attempts"] = tuple(data.get("attempts") or ())
        return cls(**data)


# ------------------------------------------------------------------------------------------ sizes


def module_sizes(source: str, readers: Sequence[str] = ("get_inputs", "get_init_inputs")) -> dict[str, int]:
    """A KernelBench file's sizes: module-level names bound to an integer (a literal or arithmetic on literals and
    earlier sizes) that the `readers` functions read. Read from the text; nothing is imported."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    values: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            value = _int_value(node.value, values)
            for target in node.targets if value is not None else ():
                values[target.id] = value  # type: ignore[attr-defined]
    read: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in readers:
            read.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    return {k: v for k, v in values.items() if k in read}


def _int_value(node: ast.AST, known: Mapping[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Pow)):
        left, right = _int_value(node.left, known), _int_value(node.right, known)
        if left is None or right is None or (isinstance(node.op, ast.Pow) and not 0 <= right <= 64):
            return None
        if isinstance(node.op, ast.FloorDiv):
            return left // right if right else None
        return {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right,
                ast.Pow: left ** right}[type(node.op)]  # type: ignore[index]
    return None


def _int_sizes(shape: Mapping[str, Any]) -> dict[str, int]:
    return {k: v for k, v in shape.items() if type(v) is int}


def batch_name(sizes: Mapping[str, int]) -> str | None:
    """The size named like a batch, else the first one."""
    named = next((k for k in sizes if "batch" in k.lower()), None)
    return named or next(iter(sizes), None)


def nearby(value: int, rng: random.Random, larger: bool, constraint: Mapping[str, Any] | None = None) -> int:
    """A size near `value` that breaks the usual assumptions: odd (no power of two divides it), or an odd multiple
    of the constraint's `multiple_of`; within its `min`/`max`; the value itself where `fixed` or nothing fits."""
    constraint = constraint or {}
    if constraint.get("fixed"):
        return value
    step = int(constraint.get("multiple_of") or 1)
    low, high = int(constraint.get("min") or 1), constraint.get("max")
    units = max(1, value // step)
    spread = max(2, units // 8)
    picks = range(units + 1, units + spread + 2) if larger else range(max(1, units - spread - 1), units)
    odd = [k for k in picks if k % 2 and k * step != value and k * step >= low and (high is None or k * step <= high)]
    if not odd:  # the other way, then any odd multiple in range
        other = range(max(1, units - spread - 1), units) if larger else range(units + 1, units + spread + 2)
        odd = [k for k in other if k % 2 and k * step >= low and (high is None or k * step <= high)]
    return rng.choice(odd) * step if odd else value


# ------------------------------------------------------------------------------------------ variants


def variant_seed(seeds: Sequence[int], index: int) -> int:
    """A variant's seed: keyed by the evaluation's secret seeds, as the timed sets' are (plan.timing_seed)."""
    key = b"".join(int(s).to_bytes(8, "little", signed=True) for s in seeds)
    digest = hashlib.blake2b(f"held-out {index}".encode(), key=key[-64:], digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def draw(shape_sets: Sequence[Mapping[str, Any]], seeds: Sequence[int], *, globals_sizes: Mapping[str, int] | None
         = None, constraints: Mapping[str, Mapping[str, Any]] | None = None) -> list[list[Variant]]:
    """For each variant, the forms the reference is offered in turn (see the module doc): every size moved with
    the values changed, every size moved, the batch alone with the values changed, the batch alone. `globals_sizes`:
    a KernelBench file's sizes (module_sizes); else the shape sets' integer keywords are the sizes."""
    constraints = constraints or {}
    out: list[list[Variant]] = []
    for index in range(VARIANTS):
        seed = variant_seed(seeds, index)
        rng = random.Random(seed)
        base = rng.randrange(len(shape_sets)) if shape_sets else 0
        listed = dict(globals_sizes) if globals_sizes is not None else dict(shape_sets[base] if shape_sets else {})
        where = "globals" if globals_sizes is not None else "kwargs"
        sizes = _int_sizes(listed)
        larger = index % 2 == 1
        batch = batch_name(sizes)
        everything = dict(listed)
        for name, value in sizes.items():
            if name == batch:
                everything[name] = nearby(max(value, 2), rng, larger, constraints.get(name))
            elif value >= MIN_SIZE:
                everything[name] = nearby(value, rng, rng.random() < 0.5, constraints.get(name))
        batch_only = dict(listed)
        if batch is not None:
            batch_only[batch] = everything[batch]
        values = Values(scale=round(rng.uniform(2.0, 4.0), 2), offset=round(rng.choice((-1, 1)) * rng.uniform(0.5,
                        1.5), 2), tail=0.01, tail_factor=float(rng.choice((6, 8, 10))))
        forms = []
        for moved_sizes in (everything, batch_only):
            moved = tuple(k for k in moved_sizes if moved_sizes[k] != listed.get(k))
            for changed in (values, None):
                form = Variant(index=index, base=base, sizes=moved_sizes, where=where, seed=seed, values=changed,
                               moved=moved)
                if form not in forms:
                    forms.append(form)
        out.append(forms)
    return out


def form_text(form: Variant) -> str:
    """'sizes n=1001, batch=15 with changed values': what one form of a variant moved."""
    sizes = "sizes " + ", ".join(f"{k}={form.sizes[k]}" for k in form.moved) if form.moved else "the listed sizes"
    return sizes + (" with changed values" if form.values else "")


def skipped(forms: Sequence[Variant], reasons: Sequence[str]) -> Variant:
    """A variant the reference ran in no form: the first form, with every form's reason."""
    return replace(forms[0], skipped="; ".join(dict.fromkeys(reasons))[:500], attempts=tuple(reasons))


# ------------------------------------------------------------------------------------------ in a worker


@contextlib.contextmanager
def module_globals(modules: Sequence[ModuleType], variant: Variant | None) -> Iterator[None]:
    """A KernelBench variant's sizes set on the trusted modules (the inputs', the reference's) while it runs, put
    back after. A variant of keywords, or none, changes nothing."""
    if variant is None or variant.where != "globals":
        yield
        return
    saved = [(m, {k: m.__dict__[k] for k in variant.sizes if k in m.__dict__}) for m in modules]
    try:
        for module, _ in saved:
            module.__dict__.update(variant.sizes)
        yield
    finally:
        for module, old in saved:
            module.__dict__.update(old)


def shape_of(variant: Variant, listed: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords the inputs callable gets for a variant: its sizes where they are keywords, else the listed."""
    return dict(variant.sizes) if variant.where == "kwargs" else dict(listed)


def left_alone(slots: Iterable[int], keep_values: Iterable[int]) -> frozenset[int]:
    """The inputs whose values no check changes (held-out values, changed elements): output buffers, and the
    manifest's `keep_values` (a structure the kernel may rely on, such as RoPE's cos and sin tables). Both workers
    use the same set, so both make the same change."""
    return frozenset(slots) | frozenset(keep_values)


def change_values(inputs: Sequence[Any], values: Values | None, seed: int, skip: frozenset[int] = frozenset()) -> None:
    """Scale, offset and give a heavy tail to every floating-point input in place (the same change in both
    workers: the tail's positions come from `seed`). Output buffers (`skip`) are left as they are."""
    if values is None:
        return
    import torch

    for i, value in enumerate(inputs):
        if i in skip or not isinstance(value, torch.Tensor) or not value.is_floating_point() or not value.numel():
            continue
        with torch.no_grad():
            value.mul_(values.scale).add_(values.offset)
            count = max(1, int(value.numel() * values.tail))
            generator = torch.Generator().manual_seed((seed + i) % (1 << 63))
            where = torch.randint(value.numel(), (count,), generator=generator).to(value.device)
            flat = value.view(-1) if value.is_contiguous() else None
            if flat is not None:
                flat[where] = flat[where] * values.tail_factor
