"""CUDA graphs for timing short kernels: captured, proven to hold the call's work, and replayed.

A kernel under a millisecond timed eagerly measures the host's launches as much as the kernel; replaying a
captured graph puts the calls back to back on the device. A capture counts only when proven (no capture warning,
and a replay with its outputs poisoned reproduces the eager call), the two sides' graphs write the same output
memory where their layouts match, and `GraphReplays` is what the timing loop calls in place of each side.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import torch

from kforge_bot.evaluate.wire import checks
from kforge_bot.targets.base import Target


class _Unproven(Exception):
    """A capture that does not hold the call's work: timing stays eager for both sides."""


def capture_graphs(target: Target, fns: tuple[Callable[[list[Any]], Any], ...],
                    input_sets: list[list[Any]]) -> tuple[tuple[Callable[[list[Any]], Any], ...], str] | str:
    """Per side, one CUDA graph per input set; returns the replaying stand-ins (baseline, candidate) and a note
    on where their outputs lie, or why graphs cannot be used.

    A capture counts only if it is proven to hold the call's work: it raised no warning (a kernel launched on
    the legacy default stream is left out of the capture with only a warning, and the graph then replays
    nothing), and a replay, with its static outputs poisoned first, reproduces what an eager call of the
    same inputs returns.

    Placement: a graph writes its outputs where they were allocated at capture, for every replay. Captured into
    pools of their own, the two sides' outputs lay apart for the whole run, and where an output lies moves a
    memory-bound kernel's time: an A/A of KernelBench L1 12 (a 52 us scaling of a 4096x4096 matrix) read 0.988x
    (0.983-0.993) on the H200. So the candidate is captured into the baseline's pool after the baseline's outputs
    were released there: with the same output layout it gets the same memory, and both sides replay into it (the
    baseline's replays proven again afterwards). Outputs of another layout keep pools of their own, as the note
    says. Sharing is safe here because each sample's outputs are copied and poisoned before the other side's
    next replay."""
    try:
        replays: list[dict[int, tuple[Any, Any]]] = [{} for _ in fns]
        apart = 0
        for inputs in input_sets:
            pair = _capture_sharing_outputs(target, fns, inputs) if len(fns) == 2 else None
            if pair is None:
                apart += 1
                pair = tuple(_capture(target, fn, inputs, None)[:2] for fn in fns)
            for side, captured in enumerate(pair):
                replays[side][id(inputs)] = captured
    except _Unproven as why:
        target.synchronize()
        return str(why)
    except Exception as exc:  # noqa: BLE001 - capture is an optimisation; eager timing remains correct
        target.synchronize()
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    target.synchronize()
    note = "" if not apart else (f"graph outputs in separate memory for {apart} of {len(input_sets)} input sets "
                                 "(the two sides' output layouts differ)")
    return tuple(GraphReplays(graphs) for graphs in replays), note


class GraphReplays:
    """One side's graphs, one per input set, called as the side's function is (`replays(inputs)`)."""

    def __init__(self, graphs: dict[int, tuple[Any, Any]]) -> None:
        self._graphs = graphs

    def __call__(self, inputs: list[Any]) -> Any:
        graph, out = self._graphs[id(inputs)]
        graph.replay()
        return out

    def output(self, inputs: list[Any]) -> Any:
        """The static outputs of `inputs`' graph, as its last replay left them."""
        return self._graphs[id(inputs)][1]

    def poison_outputs(self) -> None:
        """Every graph's static outputs poisoned (base-class calls: the candidate made these tensors). A graph
        writes the same memory at every replay, so a kernel that returns early when its output already holds a
        value would otherwise be timed doing nothing wherever the last sample left an answer."""
        checks.poison_outputs([out for _, out in self._graphs.values()])


def _capture(target: Target, fn: Callable[[list[Any]], Any], inputs: list[Any], pool: Any) -> tuple[Any, Any, list]:
    """One proven capture of `fn` on `inputs` (into `pool`, or a pool of its own): (graph, its static output,
    the eager call's outputs)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(inputs)  # warm-up on a side stream, as graph capture requires
    torch.cuda.current_stream().wait_stream(side)
    target.synchronize()
    expected = [o.clone() for o in tensors_of(fn(inputs))]
    target.synchronize()
    graph = torch.cuda.CUDAGraph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.cuda.graph(graph, pool=pool):
            out = fn(inputs)
    # The capture's own warnings (torch/cuda/graphs.py, or about capturing), not unrelated ones.
    warned = [w for w in caught if "graphs" in w.filename or "captur" in str(w.message).lower()]
    if warned:
        raise _Unproven(f"capture warned: {str(warned[0].message).splitlines()[0][:200]}")
    _prove(target, graph, tensors_of(out), expected)
    return graph, out, expected


def _prove(target: Target, graph: Any, static: list[Any], expected: list[Any]) -> None:
    for t in static:  # base-class calls: a fill_ of the candidate's own would leave the memory as it was
        torch.Tensor.fill_(t, math.nan if torch.Tensor.is_floating_point(t) else -1)
    graph.replay()
    target.synchronize()
    if len(static) != len(expected) or not all(_same(a, b) for a, b in zip(static, expected)):
        raise _Unproven("a replay did not reproduce the eager call's outputs (the graph misses work)")


def _capture_sharing_outputs(target: Target, fns: tuple[Callable[[list[Any]], Any], ...],
                             inputs: list[Any]) -> tuple[tuple[Any, Any], tuple[Any, Any]] | None:
    """Both sides captured into one pool, writing the same output memory; None where their layouts differ."""
    baseline, candidate = fns
    pool = torch.cuda.graph_pool_handle()
    graph_b, out_b, expected_b = _capture(target, baseline, inputs, pool)
    layout = _layout(out_b)
    del out_b  # released into the pool: the candidate's capture allocates its outputs there
    graph_c, out_c, _ = _capture(target, candidate, inputs, pool)
    static = tensors_of(out_c)
    # The baseline's side will handle these tensors: only plain ones, read through the base class.
    if any(type(t) is not torch.Tensor or vars(t) for t in static) or _layout(out_c) != layout:
        return None
    _prove(target, graph_b, static, expected_b)  # the baseline's replay fills the shared memory as it should
    # The baseline's side gets aliases the harness made: the candidate's own tensor objects could gain methods of
    # its choosing later, and the baseline's callbacks would call them with the baseline's fresh answer.
    return (graph_b, [torch.Tensor.detach(t) for t in static]), (graph_c, out_c)


def _layout(out: Any) -> list[tuple[int, tuple[int, ...], tuple[int, ...], Any]]:
    return [(torch.Tensor.data_ptr(t), tuple(t.shape), tuple(torch.Tensor.stride(t)), t.dtype) for t in tensors_of(out)]


def tensors_of(out: Any) -> list[Any]:
    """The tensors among (nested) outputs."""
    return [o for o in checks.flatten_outputs(out) if hasattr(o, "is_floating_point")]


def _same(a: Any, b: Any) -> bool:
    """A replay's output against the eager call's: equal up to the reordering of floating-point sums that
    atomics allow, and never NaN where the eager call had a number (a poisoned element left unwritten)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return bool(torch.equal(a, b))
    if bool((a.isnan() & ~b.isnan()).any()):
        return False
    return bool(torch.allclose(a.float(), b.float(), rtol=1e-3, atol=1e-5, equal_nan=True))
