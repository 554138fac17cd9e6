"""The framework profile's digest and the FLOP count the roofline uses (evaluate.worker.profile), on the CPU."""

from __future__ import annotations

import torch

from kforge_bot.evaluate.worker.profile import compute_ops, count_flops, profile_call


def test_flops_are_counted_once_per_op_and_unknown_is_not_zero() -> None:
    a, w, b = torch.randn(64, 128), torch.randn(32, 128), torch.randn(32)
    # linear -> addmm: 2*64*128*32 FLOPs, counted once although addmm runs inside linear.
    assert count_flops(lambda: torch.nn.functional.linear(a, w, b)) == 2 * 64 * 128 * 32
    assert count_flops(lambda: torch.softmax(a, dim=1)) is None  # no formula: unknown, not 0


def test_the_cpu_digest_names_the_compute_ops() -> None:
    x = torch.randn(16, 16)
    digest = profile_call(lambda: torch.relu(x @ x), torch.device("cpu"), lambda: None)
    assert "aten::mm" in digest["compute_ops"] and "aten::relu" in digest["compute_ops"]
    assert compute_ops(["aten::view", "aten::mm"]) == ["aten::mm"]
