"""Choosing a target by name: the classes behind the names, `auto`, and what a machine without a GPU says."""

from __future__ import annotations

import pytest
import torch

from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import TARGET_KINDS
from kforge_bot.targets import (
    AUTO_ORDER,
    available,
    cpu_model,
    choose_target,
    make_target,
    target_class,
    target_index,
    target_kind,
    unavailable_reason,
)
from kforge_bot.targets.cpu import CpuTarget

NO_CUDA = not torch.cuda.is_available()


def test_every_kind_has_a_target_class_and_auto_tries_each_once() -> None:
    assert sorted(AUTO_ORDER) == sorted(TARGET_KINDS) and AUTO_ORDER[-1] == "cpu"
    for kind in TARGET_KINDS:
        assert target_class(kind).kind == kind
    with pytest.raises(KforgeError, match="unknown target 'tpu'"):
        target_class("tpu")
    target = make_target("cpu")
    assert isinstance(target, CpuTarget) and target.index == 0


def test_the_cpu_is_always_available_and_auto_falls_back_to_it() -> None:
    assert available("cpu") and unavailable_reason("cpu") is None
    assert choose_target("cpu").device_kind() == "cpu"
    assert choose_target("auto").device_kind(("cpu",)) == "cpu"
    with pytest.raises(KforgeError, match="no device this kernel supports"):
        choose_target("auto").device_kind(())


@pytest.mark.skipif(not NO_CUDA, reason="this machine has a CUDA device")
def test_a_machine_without_cuda_says_so() -> None:
    assert not available("cuda")
    reason = unavailable_reason("cuda")
    assert reason is not None and "CUDA" in reason
    if choose_target("auto").device_kind() != "cpu":  # an XPU or MPS machine picks its GPU
        return
    assert choose_target("auto").device_kind(("cuda", "cpu")) == "cpu"


def test_an_evaluation_s_target_names_its_kind_and_device() -> None:
    assert [target_kind(t) for t in ("cuda:1", "cuda", "cpu", "xpu:0")] == ["cuda", "cuda", "cpu", "xpu"]
    assert [target_index(t) for t in ("cuda:1", "cuda", "cpu", "cuda:x")] == [1, 0, 0, 0]


def test_the_cpu_model_is_named() -> None:
    assert cpu_model().strip()


def test_one_reading_of_a_target_for_every_command_the_gate_and_evaluate() -> None:
    """auto, a device kind or a runner class (its device kind), from --target or the policy; a named kind must be
    on this machine (unless only the name is being checked, as --target is when the options are read)."""
    from kforge_bot.targets import TargetChoice

    assert choose_target("auto") == TargetChoice("auto", None)
    assert choose_target(" cpu ") == TargetChoice("cpu", "cpu")
    assert choose_target("h200", here=False) == TargetChoice("h200", "cuda", "h200")
    assert choose_target("arc-b580", here=False).kind == "xpu"
    assert choose_target(choose_target("cpu")) == choose_target("cpu")  # a target already chosen stays as it is
    with pytest.raises(KforgeError, match=r"unknown target 'tpu' \(use auto, a device kind \(cpu, cuda, xpu, mps\) or a "
                                          r"runner class \(.*h200"):
        choose_target("tpu", here=False)
    # Where a kernel is measured: the named kind if it runs there, else auto's first kind this machine has.
    assert choose_target("cpu").kernel_kind(("cpu", "cuda")) == ("cpu", "")
    assert choose_target("cpu").kernel_kind(("cuda",)) == (None, "the kernel does not run on cpu (its targets: cuda)")
    assert choose_target("auto").kernel_kind(("cpu",)) == ("cpu", "")
    assert choose_target("h200", here=False).needs == "h200: NVIDIA H200 SXM"


@pytest.mark.skipif(not NO_CUDA, reason="this machine has a CUDA device")
def test_a_named_device_this_machine_lacks_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import kforge_bot.targets as targets

    monkeypatch.setattr(targets, "_device_nodes_present", lambda kind: False)
    with pytest.raises(KforgeError, match="target 'cuda' is not available on this machine"):
        choose_target("cuda")
    with pytest.raises(KforgeError, match="target 'h200' needs a cuda device, and this machine has none"):
        choose_target("h200")
    if choose_target("auto").device_kind() == "cpu":
        assert choose_target("auto").kernel_kind(("cuda",)) == (
            None, "none of the kernel's targets (cuda) is on this machine")
