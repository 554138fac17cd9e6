"""What one call of a kernel's entry gives back, as a manifest describes it (spec.KernelSpec): the returns it
selects (`outputs:`), the inputs the call writes (`inplace:`), and, for a kernel with a backward, the gradients of
the inputs it names (`backward:`), computed by autograd through the entry (an autograd.Function's `.apply`, or any
callable whose outputs carry a graph) with random upstream gradients drawn from the case's seed.

Worker-side only. Every side of an evaluation (the reference, the kernel as written, the candidate) is wrapped
alike; a reference with an oracle of its own (`reference_returns: outputs`) returns the results itself (and the
in-place inputs' values after them), and its gradients come from torch's autograd through it.
"""

from __future__ import annotations

import inspect as _inspect  # the worker's own use; bound before user code exists
from typing import Any, Callable

import torch

from kforge_bot.evaluate.wire.checks import CheckFailure, flatten_outputs
from kforge_bot.kernelspec import KernelSpec
from kforge_bot.kernelspec.manifest_fields import name_positions

_randn = torch.randn
_Generator = torch.Generator
_grad = torch.autograd.grad
_enable_grad = torch.enable_grad
_no_grad = torch.no_grad
_equal = torch.equal
_allclose = torch.allclose


def wrap(obj: Any, built: Callable[..., Any], spec: KernelSpec, own_oracle: bool,
         module: Any = None) -> Callable[..., Any]:
    """`built` (loading.build_callable's) as the harness calls it: wrapped where the spec needs it, else as is.
    `module`: the one the entry was found in (where a backward launcher is looked up)."""
    return EntryCall(obj, built, spec, own_oracle, module) if uses_conventions(spec) else built


def uses_conventions(spec: KernelSpec) -> bool:
    """Whether calls of this spec's entries need wrapping (a selection, in-place inputs or a backward)."""
    return spec.outputs is not None or bool(spec.inplace) or bool(spec.grad_inputs)


def parameter_names(obj: Any) -> list[str]:
    """The entry's parameters in call order (an autograd.Function's forward without ctx), for names in
    `inplace:` and `backward.inputs:`."""
    target = obj.forward if isinstance(obj, type) and issubclass(obj, torch.autograd.Function) else \
        obj.forward if isinstance(obj, torch.nn.Module) else obj
    try:
        names = list(_inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return []
    if isinstance(obj, type) and issubclass(obj, torch.autograd.Function) and names:
        names = names[1:]  # ctx
    return names


def positions(items: tuple[int | str, ...], names: list[str], what: str) -> list[int]:
    """Input positions for a manifest's indices or parameter names."""
    found, unknown = name_positions(items, names)
    if unknown:
        raise CheckFailure("crash", f"{what}: the entry has no parameter {unknown[0]!r} (has: {', '.join(names)})")
    return [int(i) for i in found]


def select(value: Any, outputs: tuple[int | str, ...] | None) -> list[Any]:
    """The selected returns: by position in a tuple or list, by key in a dict, by field in a namedtuple."""
    if outputs is None:
        return flatten_outputs(value)
    if type(value) is torch.Tensor and outputs == (0,):  # noqa: E721 - a lone tensor is output 0
        return [value]
    chosen: list[Any] = []
    for item in outputs:
        if isinstance(item, str):
            if type(value) is dict:  # noqa: E721 - a plain dict's own lookup, no subclass's __getitem__
                if item not in value:
                    keys = ", ".join(map(str, dict.keys(value)))
                    raise CheckFailure("incorrect", f"the entry returned no {item!r} (keys: {keys})")
                chosen.extend(flatten_outputs(dict.__getitem__(value, item)))
                continue
            fields = getattr(type(value), "_fields", None)
            if issubclass(type(value), tuple) and fields and item in fields:
                chosen.extend(flatten_outputs(tuple.__getitem__(value, fields.index(item))))
                continue
            raise CheckFailure("incorrect", f"the entry returned a {type(value).__name__}, which has no {item!r}")
        kind = type(value)  # not isinstance: that reads a claimed __class__ (checks.flatten_outputs)
        if not issubclass(kind, (tuple, list)):
            raise CheckFailure("incorrect", f"the entry returned a {kind.__name__}, not a tuple to index")
        items = list(tuple.__iter__(value) if issubclass(kind, tuple) else list.__iter__(value))
        if item >= len(items):
            raise CheckFailure("incorrect", f"the entry returned {len(items)} values; output {item} selected")
        chosen.extend(flatten_outputs(items[item]))
    return chosen


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same memory, or equal values (NaN where the other has NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.data_ptr() == b.data_ptr() and a.stride() == b.stride():
        return True
    return bool(_equal(a, b)) or (a.is_floating_point() and bool(_allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True)))


def _draw_upstream(seed: int, index: int, like: torch.Tensor) -> torch.Tensor:
    """Output `index`'s random upstream gradient for an input set's seed: the same on every side."""
    generator = _Generator(device=like.device).manual_seed((seed + 7919 * (index + 1)) % (1 << 63))
    return _randn(like.shape, dtype=like.dtype, device=like.device, generator=generator)


class EntryCall:
    """One side's callable as the harness calls it: `call(*inputs)` returns the list of results (the selected
    returns, then the in-place inputs, then the gradients); `bind(inputs, seed)` says which seed an input set's
    upstream gradients come from (the reference's worker draws the same ones from the same seed)."""

    def __init__(self, obj: Any, fn: Callable[..., Any], spec: KernelSpec, own_oracle: bool,
                 module: Any = None) -> None:
        self.fn = fn
        self.own_oracle = own_oracle  # a reference of its own: its returns are the results
        names = parameter_names(obj)
        self.names = names
        self.outputs = None if own_oracle else spec.outputs
        self.inplace = [] if own_oracle else positions(spec.inplace, names, "inplace")
        self.grads = positions(spec.grad_inputs, names, "backward.inputs") if spec.grad_inputs else []
        # Inputs whose gradient the backward writes into their own memory (`backward.inplace`; never an oracle's):
        # that memory, after the call, is the gradient compared.
        self.grad_inplace = [] if own_oracle or not spec.grad_inplace else \
            positions(spec.grad_inplace, names, "backward.inplace")
        stray = [i for i in self.grad_inplace if i not in self.grads]
        if stray:
            raise CheckFailure("crash", f"backward.inplace: input {stray[0]} is not in backward.inputs")
        # A backward launcher (the kernel's, never an oracle's: the reference's gradients are autograd's), with its
        # arguments as (kind, where): the upstream gradient of a selected output, an input, a raw return, a literal.
        self.launcher: Callable[..., Any] | None = None
        self.launch_args: list[tuple[str, Any]] = []
        self.launch_returns: tuple[int | str, ...] | None = None
        if spec.backward_launcher and not own_oracle:
            name = spec.backward_launcher["launcher"]
            if module is None or not callable(getattr(module, name, None)):
                raise CheckFailure("crash", f"backward.launcher: the entry's module defines no callable {name!r}")
            self.launcher = getattr(module, name)
            for arg in spec.backward_launcher["args"]:
                kind, dot, rest = arg.partition(".") if isinstance(arg, str) else ("", "", "")
                if dot and kind == "input":
                    self.launch_args.append(("input", positions((int(rest) if rest.isdigit() else rest,), names,
                                                                "backward.args")[0]))
                elif dot and kind in ("grad", "output"):
                    self.launch_args.append((kind, int(rest)))
                else:
                    self.launch_args.append(("literal", arg))
            returns = spec.backward_launcher.get("returns")
            self.launch_returns = None if returns is None else tuple(returns)
        self._elsewhere: list[int] = []  # inputs whose returned gradient is not what the backward wrote into them
        self.copy_inplace = True  # in-place results copied (the buffers are refilled later); timing says False
        self._seeds: dict[tuple[int, ...], int] = {}
        self._upstream: dict[tuple[tuple[int, ...], int], torch.Tensor] = {}

    @property
    def written(self) -> list[int]:
        """Every input a call may write: the forward's in-place inputs, then those the backward writes its gradient
        into (put back between timed samples, exempt from the inputs-unchanged check: each is compared instead)."""
        return [*self.inplace, *self.grad_inplace]

    def fresh(self, results: list[Any]) -> list[Any]:
        """The results that must be memory of their own (all but the in-place inputs, which follow the selected
        returns)."""
        if not self.inplace:
            return results
        selected = len(results) - len(self.inplace) - (len(self.grads) if self.grads else 0)
        return results[:selected] + results[selected + len(self.inplace):]

    # ------------------------------------------------------------------------------- the upstream gradients

    @staticmethod
    def _key(inputs: Any) -> tuple[int, ...]:
        """An input set by its tensors (the same objects whoever passes them: a list, or unpacked arguments)."""
        return tuple(id(t) for t in inputs if isinstance(t, torch.Tensor))

    def bind(self, inputs: list[Any], seed: int) -> None:
        key = self._key(inputs)
        self._seeds[key] = seed
        # Redrawn into the same memory: a CUDA graph captured on these inputs reads its upstream gradients from
        # there, so new tensors would leave a replayed backward on the old seed's gradients.
        for (cached_key, i), cached in self._upstream.items():
            if cached_key == key:
                cached.copy_(_draw_upstream(seed, i, cached))

    def moved(self, old_inputs: list[Any], inputs: list[Any]) -> None:
        """The input set that held `old_inputs` now holds new tensors (timing's fresh storage): its seed and
        upstream gradients go with it."""
        old_key, key = self._key(old_inputs), self._key(inputs)
        if old_key not in self._seeds or key == old_key:
            return
        self._seeds[key] = self._seeds.pop(old_key)
        for (cached_key, i) in [k for k in self._upstream if k[0] == old_key]:
            self._upstream[(key, i)] = self._upstream.pop((cached_key, i))

    def upstream(self, inputs: Any, outs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Random upstream gradients for `outs`, drawn from the input set's seed (the same on every side); kept for
        a bound set, drawn afresh (seed 0) for one never bound (a profiled call)."""
        key = self._key(inputs)
        seed = self._seeds.get(key, 0)
        ups = []
        for i, out in enumerate(outs):
            cached = self._upstream.get((key, i)) if key in self._seeds else None
            if cached is None or cached.shape != out.shape or cached.dtype != out.dtype:
                cached = _draw_upstream(seed, i, out)
                if key in self._seeds:
                    self._upstream[(key, i)] = cached
            ups.append(cached)
        return ups

    # ------------------------------------------------------------------------------------------- calls

    def forward(self, *inputs: Any) -> list[Any]:
        """The forward alone, without autograd (timed as the forward direction)."""
        with _no_grad():
            value = self.fn(*inputs)
        return self._results(value, inputs)

    def __call__(self, *inputs: Any) -> list[Any]:
        """Forward, and with a backward the gradients too (the direction every output check is made on)."""
        if not self.grads:
            return self.forward(*inputs)
        # The inputs whose gradients are checked, as they were (on correctness calls, where results are copied; timing's
        # calls are those already checked): one declared written (`backward.inplace`) but left so disagrees with the
        # manifest, and one written undeclared is named with the declaration that would allow it.
        watched = [i for i in self.grads if i not in self.inplace] if self.copy_inplace and not self.own_oracle else []
        before = {i: inputs[i].detach().clone() for i in watched if isinstance(inputs[i], torch.Tensor)}
        results, graph = self.build_graph(list(inputs))
        results = [o.detach() if isinstance(o, torch.Tensor) else o for o in results]
        if self.inplace and self.copy_inplace:  # the inputs it wrote, as the forward alone gives them
            results[len(results) - len(self.inplace):] = [o.clone() for o in results[len(results) - len(self.inplace):]]
        self._elsewhere = []
        grads = self.backward(*graph)
        for i, was in before.items():
            kept = _equal(inputs[i], was)
            if i in self.grad_inplace and kept:
                raise CheckFailure("incorrect", f"backward.inplace declares that the backward writes the gradient of "
                                                f"input {self._name(i)} into it, but the call left it as it was (drop "
                                                "it from backward.inplace where the gradient is returned instead)")
            if i not in self.grad_inplace and not kept:
                raise CheckFailure("rejected", f"input {self._name(i)} was modified in place (inputs must stay "
                                               "unchanged; a backward that writes its gradient into it declares so: "
                                               f"backward.inplace: [{self._name(i)}])")
        if self._elsewhere:
            name = self._name(self._elsewhere[0])
            raise CheckFailure("incorrect", f"backward.inplace: the backward returned a gradient of input {name} "
                                            f"other than what it wrote into {name} (declared: the gradient is written "
                                            "there)")
        return results + grads

    def _name(self, i: int) -> str:
        return self.names[i] if i < len(self.names) else str(i)

    def build_graph(self, inputs: list[Any]) -> tuple[list[Any], tuple[Any, list[Any], list[torch.Tensor]]]:
        """The forward with autograd: (its results, (the differentiable ones, the leaves, their upstream
        gradients)); with a backward launcher, the forward alone: (its results, (its raw returns, the inputs, the
        upstream gradients of its floating-point results))."""
        if self.launcher is not None:
            with _no_grad():
                value = self.fn(*inputs)
            outs = self._results(value, inputs, copy=False)
            floats = [o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point()]
            ups = [u.clone() for u in self.upstream(inputs, floats)]
            return outs, (value, list(inputs), ups)
        leaves = list(inputs)
        for i in self.grads:
            if i >= len(leaves) or not isinstance(leaves[i], torch.Tensor) or not leaves[i].is_floating_point():
                raise CheckFailure("crash", f"backward.inputs: input {i} is not a floating-point tensor")
            leaves[i] = leaves[i].detach().requires_grad_(True)  # the same memory: writes to it still show
        with _enable_grad():
            value = self.fn(*leaves)
        outs = self._results(value, leaves, copy=False)
        differentiable = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        if not differentiable and self.inplace:
            # An in-place forward (RoPE's rotating q and k) whose results are the inputs it wrote: the returns (views
            # of them, in the order `inplace` lists them) carry the graph.
            differentiable = [o for o in flatten_outputs(value) if isinstance(o, torch.Tensor) and o.requires_grad]
        if not differentiable:
            raise CheckFailure("incorrect", "no output carries a gradient (the entry's outputs are not connected to "
                                            "its inputs by autograd: declare an autograd.Function as the entry)")
        # Copies: a backward may write into its upstream gradient (Liger's in_place=True does), which must not
        # change the next call's.
        ups = [u.clone() for u in self.upstream(inputs, differentiable)]
        return outs, (differentiable, [leaves[i] for i in self.grads], ups)

    def backward(self, outs: Any, leaves: list[Any], ups: list[torch.Tensor]) -> list[Any]:
        """The gradients, on a graph built beforehand (alone, it is timed as the backward direction)."""
        if self.launcher is not None:
            return self._written(self._launch(outs, leaves, ups), [leaves[i] for i in self.grads])
        grads = _grad(outs, leaves, ups, allow_unused=True)
        # An input the outputs do not depend on has gradient zero: where the reference's is not, that shows.
        return self._written([torch.zeros_like(leaf) if g is None else g for g, leaf in zip(grads, leaves)], leaves)

    def _written(self, grads: list[Any], buffers: list[Any]) -> list[Any]:
        """The gradients, each declared written into its input (`backward.inplace`) taken from that input's memory,
        what the kernel actually wrote; on a correctness call a returned gradient that differs from it disagrees
        with the declaration."""
        if not self.grad_inplace:
            return grads
        grads = list(grads)
        for k, i in enumerate(self.grads):
            if i not in self.grad_inplace:
                continue
            buffer = buffers[k].detach()
            returned = grads[k]
            if self.copy_inplace:
                if isinstance(returned, torch.Tensor) and not _same_values(returned.detach(), buffer):
                    self._elsewhere.append(i)  # said by the call, after whether it wrote there at all
                buffer = buffer.clone()
            grads[k] = buffer
        return grads

    def _launch(self, value: Any, inputs: list[Any], ups: list[torch.Tensor]) -> list[Any]:
        """The backward launcher on the forward's saved values; its returns (or those `returns` selects) are the
        gradients, in the order `backward.inputs` lists the inputs."""
        kind = type(value)
        raw = list(tuple.__iter__(value) if issubclass(kind, tuple) else list.__iter__(value)) \
            if issubclass(kind, (tuple, list)) else [value]
        args = []
        for source, where in self.launch_args:
            pool = {"grad": ups, "input": inputs, "output": raw}.get(source)
            if pool is not None and where >= len(pool):
                raise CheckFailure("crash", f"backward.args: {source}.{where} is not there ({len(pool)} of them)")
            args.append(where if pool is None else pool[where])
        with _no_grad():
            returned = self.launcher(*args)
        grads = select(returned, self.launch_returns)
        if len(grads) != len(self.grads):
            raise CheckFailure("incorrect", f"the backward launcher gave {len(grads)} gradients for "
                                            f"{len(self.grads)} inputs (backward.returns selects them)")
        return grads

    def _results(self, value: Any, inputs: Any, copy: bool | None = None) -> list[Any]:
        chosen = select(value, self.outputs)
        copy = self.copy_inplace if copy is None else copy
        written = [inputs[i].detach().clone() if copy else inputs[i].detach() for i in self.inplace]
        return chosen + written
