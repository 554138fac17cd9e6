"""CUDA graphs for timing (evaluate.wire.graphs), on the host: what a side's replays hand the timing loop.

Capture itself needs a GPU (tests/test_gpu.py); here stand-in graphs show how replays, their outputs and the
poisoning between samples fit together."""

from __future__ import annotations

from typing import Any

import torch

from kforge_bot.evaluate.wire import graphs


class _Graph:
    def __init__(self, inputs: list[Any], out: torch.Tensor) -> None:
        self.inputs, self.out = inputs, out

    def replay(self) -> None:
        self.out.copy_(self.inputs[0] + 1)


def test_a_replay_returns_its_graphs_static_output_and_poisoning_covers_every_graph() -> None:
    sets = [[torch.full((4,), float(i))] for i in range(3)]
    outs = [torch.zeros(4), torch.zeros(4, dtype=torch.int64), torch.zeros(4)]
    replays = graphs.GraphReplays({id(s): (_Graph(s, o), (o,)) for s, o in zip(sets, outs)})
    assert replays(sets[1]) == (outs[1],) and torch.equal(outs[1], torch.full((4,), 2, dtype=torch.int64))
    assert replays.output(sets[2]) == (outs[2],) and not outs[2].any()  # not replayed: as it was
    replays.poison_outputs()
    assert outs[0].isnan().all() and (outs[1] == -1).all() and outs[2].isnan().all()


def test_the_tensors_among_nested_outputs() -> None:
    a, b = torch.ones(2), torch.ones(3)
    assert graphs.tensors_of((a, [b, 7])) == [a, b]
