"""The snapshot: the framework's, the clock's and the harness's functions compared after each phase, and the
framework-state restore."""

from __future__ import annotations

import functools
import math
import os
import sys
import time
import types

import pytest
import torch

from kforge_bot.evaluate.worker.snapshot import (CRITICAL, FunctionSnapshot, framework_state, restore_framework_state,
                                          trusted_namespaces)


def test_snapshot_of_an_untouched_process_is_clean() -> None:
    snapshot = FunctionSnapshot()
    assert snapshot.changed() == []
    assert snapshot.changed(only=CRITICAL) == []


def test_patched_clock_is_seen_by_full_and_critical_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = FunctionSnapshot()
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    assert snapshot.changed() == ["time.perf_counter"]
    assert snapshot.changed(only=CRITICAL) == ["time.perf_counter"]
    monkeypatch.undo()
    assert snapshot.changed() == []


def test_a_patch_outside_the_critical_set_needs_the_full_check(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = FunctionSnapshot()
    monkeypatch.setattr(torch, "softmax", lambda *a, **k: None)
    assert snapshot.changed() == ["torch.softmax"]
    assert snapshot.changed(only=CRITICAL) == []


def test_shadowing_an_inherited_tensor_method_is_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch.Tensor.fill_ lives on torch._C.TensorBase; assigning it on torch.Tensor adds a new key
    assert "fill_" not in vars(torch.Tensor)
    snapshot = FunctionSnapshot()
    monkeypatch.setattr(torch.Tensor, "fill_", lambda self, value: self)
    assert "torch.Tensor.fill_" in snapshot.changed()
    assert "torch.Tensor.fill_" in snapshot.changed(only=CRITICAL)


def test_borrowing_another_framework_function_is_a_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = FunctionSnapshot()
    monkeypatch.setattr(torch, "equal", torch.is_tensor)  # a function whose code lives in torch
    assert snapshot.changed(only=CRITICAL) == ["torch.equal"]


def test_the_framework_wrapping_its_own_function_is_not_a_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    original = torch.manual_seed
    snapshot = FunctionSnapshot()
    # what importing torch._dynamo does to torch.manual_seed
    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(original))
    assert snapshot.changed() == []
    # the same wrapping done by a candidate (its code is not the framework's) is a patch
    monkeypatch.setattr(torch, "manual_seed", functools.wraps(original)(lambda seed: None))
    assert snapshot.changed() == ["torch.manual_seed"]


def test_a_framework_closure_over_the_original_is_not_a_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch.compile's dynamo replaces nn.Module.__init__ with a closure (code in torch) calling the original
    original = torch.nn.Module.__init__
    fake_torch_file = os.path.join(os.path.dirname(torch.__file__), "_dynamo", "fake_for_test.py")
    namespace: dict = {}
    source = (
        "def make(init):\n"
        "    def patched_init(self, *args, **kwargs):\n"
        "        init(self, *args, **kwargs)\n"
        "    return patched_init\n"
        "\n"
        "def unrelated(self, *args, **kwargs):\n"
        "    return None\n"
    )
    exec(compile(source, fake_torch_file, "exec"), namespace)
    snapshot = FunctionSnapshot()
    monkeypatch.setattr(torch.nn.Module, "__init__", namespace["make"](original))
    assert snapshot.changed() == []
    monkeypatch.setattr(torch.nn.Module, "__init__", namespace["unrelated"])  # framework code, but no wrapper
    assert snapshot.changed() == ["torch.nn.Module.__init__"]


def test_deleted_functions_and_replaced_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = FunctionSnapshot()
    monkeypatch.delattr(math, "gcd")
    monkeypatch.setitem(sys.modules, "json", types.ModuleType("json"))
    changes = snapshot.changed()
    assert "math.gcd (deleted)" in changes
    assert "json (module replaced in sys.modules)" in changes


def test_extra_objects_are_compared_by_identity() -> None:
    class Baseline(torch.nn.Module):
        def forward(self, x):
            return x

    model = Baseline()
    snapshot = FunctionSnapshot(extra={"baseline.forward": Baseline.forward})
    assert snapshot.changed({"baseline.forward": Baseline.forward}) == []
    Baseline.forward = lambda self, x: x * 0  # type: ignore[method-assign]
    assert snapshot.changed({"baseline.forward": Baseline.forward}) == ["baseline.forward"]
    assert model is not None


# ---------------------------------------------------------------------------------- framework state


def _trusted_module(folder) -> types.ModuleType:
    """A baseline's module and the helper module it imports, both from files in `folder` (as a worker writes them)."""
    import importlib.util

    (folder / "helpers_mod.py").write_text(
        "class Ctx:\n    def __enter__(self):\n        return self\n    def __exit__(self, *a):\n        return None\n"
        "def helper(x):\n    return x\n")
    (folder / "base_mod.py").write_text(
        "from helpers_mod import Ctx, helper\n"
        "def ref(x):\n    with Ctx():\n        return helper(x)\n")
    sys.path.insert(0, str(folder))
    try:
        spec = importlib.util.spec_from_file_location("_base_mod_for_test", folder / "base_mod.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("helpers_mod", None)  # as the worker leaves it: reachable only through the functions
    return module


def test_the_baselines_own_code_is_watched_however_it_is_reached(tmp_path) -> None:
    module = _trusted_module(tmp_path)
    holders = trusted_namespaces({"the baseline's module": module}, (str(tmp_path) + os.sep,))
    snap = FunctionSnapshot(holders=holders)
    assert snap.changed() == []
    assert "the baseline's module" in snap.held
    # a context manager's __enter__ patched through the class (found without sys.modules, e.g. __subclasses__)
    ctx = next(c for c in object.__subclasses__() if c.__name__ == "Ctx" and c.__module__ == "helpers_mod")
    original = ctx.__enter__
    ctx.__enter__ = lambda self: time.sleep(0) or self
    try:
        assert any(c.endswith("Ctx (class).__enter__") for c in snap.changed(only=snap.held))
    finally:
        ctx.__enter__ = original
    # a helper function replaced in the globals the baseline's function reads
    module.ref.__globals__["helper"] = lambda x: x
    assert "the baseline's module.helper" in snap.changed()
    # framework and library code is not the baseline's own
    assert not any("torch" in name for name in holders)


def test_framework_state_is_restored_and_reported() -> None:
    saved = framework_state()
    threads = torch.get_num_threads()
    other = threads + 1 if threads == 1 else 1
    try:
        torch.set_num_threads(other)
        torch.set_float32_matmul_precision("medium")
        torch.backends.cudnn.benchmark = not saved["torch.backends.cudnn.benchmark"]
        restored = restore_framework_state(saved)
        assert f"torch.get_num_threads(): {other} -> {threads}" in restored
        assert "torch.get_float32_matmul_precision(): medium -> highest" in restored or \
            saved["torch.get_float32_matmul_precision()"] != "highest"
        assert any(r.startswith("torch.backends.cudnn.benchmark") for r in restored)
        assert framework_state() == saved
        assert restore_framework_state(saved) == []
    finally:
        torch.set_num_threads(threads)
        torch.set_float32_matmul_precision(saved["torch.get_float32_matmul_precision()"])
        torch.backends.cudnn.benchmark = saved["torch.backends.cudnn.benchmark"]


# ------------------------------------------------------------------------------------------ threads


def test_how_outputs_leave_the_worker_is_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    """A save that computed the right answer only when saving would hide a timed call that never did: the
    output sinks, the device-memory export and the tensor files are part of the harness the snapshot guards."""
    from kforge_bot.evaluate.wire import devshare, outputs, tensorfile

    snapshot = FunctionSnapshot()
    monkeypatch.setattr(outputs.DeviceSink, "save", lambda self, tensors, path: None)
    monkeypatch.setattr(tensorfile, "write", lambda tensors, path: None)
    monkeypatch.setattr(devshare.ExportedBuffer, "export_fd", lambda self: -1)
    assert sorted(snapshot.changed()) == ["kforge_bot.evaluate.wire.devshare.ExportedBuffer.export_fd",
                                          "kforge_bot.evaluate.wire.outputs.DeviceSink.save",
                                          "kforge_bot.evaluate.wire.tensorfile.write"]
