"""Choosing a target by name: the classes behind the names, `auto`, and what a machine without a GPU says."""

from __future__ import annotations

import pytest
import torch

from kforge_bot.errors import KforgeError
from kforge_bot.spec import TARGET_KINDS
from kforge_bot.targets import (
    AUTO_ORDER,
    available,
    cpu_model,
    make_target,
    resolve_target_name,
    target_class,
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
    assert resolve_target_name("cpu") == "cpu"
    assert resolve_target_name("auto", ("cpu",)) == "cpu"
    with pytest.raises(KforgeError, match="no device this kernel supports"):
        resolve_target_name("auto", ())


@pytest.mark.skipif(not NO_CUDA, reason="this machine has a CUDA device")
def test_a_machine_without_cuda_says_so() -> None:
    assert not available("cuda")
    reason = unavailable_reason("cuda")
    assert reason is not None and "CUDA" in reason
    if resolve_target_name("auto") != "cpu":  # an XPU or MPS machine picks its GPU
        return
    assert resolve_target_name("auto", ("cuda", "cpu")) == "cpu"


def test_the_cpu_model_is_named() -> None:
    assert cpu_model().strip()
