"""Guards: the static scan of candidate source, the patch snapshot and the framework-state restore."""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest
import torch

from kforge_bot.evaluate.guards import (
    CRITICAL,
    FunctionSnapshot,
    ThreadWatch,
    framework_state,
    restore_framework_state,
    static_findings,
)

DATA = Path(__file__).parents[1] / "data"
ADV = DATA / "adversarial"


def _scan(source: str) -> list[str]:
    return [str(f) for f in static_findings(textwrap.dedent(source))]


# --------------------------------------------------------------------------------------- static scan

FLAGGED = [
    ("import gc", "line 1: import gc"),
    ("from gc import get_objects", "from gc import"),
    ("import inspect", "import inspect"),
    ("import atexit", "import atexit"),
    ("import signal", "import signal"),
    ("import faulthandler", "import faulthandler"),
    ("import kforge_bot.evaluate.worker", "import kforge_bot"),
    ("from kforge_bot.evaluate import checks", "from kforge_bot.evaluate import"),
    ("__import__('gc')", "dynamic import of gc"),
    ("import importlib\nimportlib.import_module('inspect')", "dynamic import of inspect"),
    ("name = 'g' + 'c'\n__import__(name)", "computed module name"),
    ("import importlib\nimportlib.import_module(''.join(['g', 'c']))", "computed module name"),
    ("import sys\nsys._getframe(1)", "sys._getframe()"),
    ("import sys\ngetattr(sys, '_getframe')(0)", "'_getframe'"),
    ("def f(fr):\n    return fr.f_back", ".f_back"),
    ("def f(fr):\n    return fr.f_locals", ".f_locals"),
    ("def f(tb):\n    return tb.tb_frame", ".tb_frame"),
    ("def f(o):\n    return getattr(o, 'f_globals')", "'f_globals'"),
    ("import gc as g\ng.get_referrers(1)", "import gc"),
    ("x = __builtins__", "__builtins__"),
    ("import sys\nsys.exit(0)", "sys.exit()"),
    ("from sys import exit", "from sys import exit"),
    ("import os\nos._exit(0)", "os._exit()"),
    ("import os\nos.kill(1, 9)", "os.kill()"),
    ("import os\nos.write(3, b'x')", "os.write()"),
    ("import os\nos.fdopen(3, 'w')", "os.fdopen()"),
    ("import os\nos.dup2(1, 3)", "os.dup2()"),
    ("open('/proc/self/fd/3', 'w')", "/proc/self/fd"),
    ("import sys\nsys.settrace(None)", "sys.settrace()"),
    ("import sys\nsys.setprofile(None)", "sys.setprofile()"),
    ("eval('1 + 1')", "eval()"),
    ("exec('x = 1')", "exec()"),
    ("import time\ntime.perf_counter = lambda: 0.0", "assignment to time.perf_counter"),
    ("import torch\ntorch.cuda.Event.elapsed_time = lambda *a: 0.0", "assignment to torch.cuda.Event.elapsed_time"),
    ("import torch\ntorch.allclose = lambda *a, **k: True", "assignment to torch.allclose"),
    ("import torch\ndel torch.softmax", "assignment to torch.softmax"),
    ("import torch\nimport torch.nn.functional as F\nF.softmax = None", "assignment to F.softmax"),
    ("import torch\nsetattr(torch, 'equal', None)", "setattr"),
    ("import builtins\nbuiltins.print = None", "assignment to builtins.print"),
]


@pytest.mark.parametrize("source,needle", FLAGGED, ids=[s.splitlines()[-1][:40] for s, _ in FLAGGED])
def test_static_scan_flags_hack_constructs(source: str, needle: str) -> None:
    findings = _scan(source)
    assert findings, source
    assert any(needle in f for f in findings), findings
    assert all(f.startswith("line ") for f in findings)


CLEAN = [
    # the kinds of code real kernels contain
    '''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class ModelNew(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.w = nn.Parameter(torch.randn(n))
            self.act = getattr(F, "gelu")

        def forward(self, x):
            return self.act(x) * self.w
    ''',
    '''
    import os
    import torch
    from torch.utils.cpp_extension import load_inline

    SRC = "torch::Tensor twice(torch::Tensor x) { return x * 2; }"
    THREADS = int(os.environ.get("OMP_NUM_THREADS", "1"))
    mod = None

    def build():
        global mod
        mod = load_inline(name="twice", cpp_sources=SRC, functions=["twice"], verbose=False)
        return mod
    ''',
    '''
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
    ''',
    '''
    import importlib
    import torch
    np = importlib.import_module("numpy")
    compiled = torch.compile(lambda x: x * 2)
    text = "the words gc and frame and exit in a sentence are fine"
    ''',
]


@pytest.mark.parametrize("source", CLEAN, ids=["module", "cpp_extension", "triton", "import_module"])
def test_static_scan_leaves_ordinary_kernels_alone(source: str) -> None:
    assert _scan(source) == []


def test_static_scan_passes_every_honest_file_in_the_test_data() -> None:
    for path in (ADV / "honest.py", ADV / "problem.py", DATA / "kb" / "softmax.py", DATA / "kb" / "softmax_new.py",
                 *sorted((DATA / "manifest_repo" / "kernels").glob("*.py"))):
        assert static_findings(path.read_text()) == [], path


def test_static_scan_reports_one_finding_per_line_in_line_order() -> None:
    findings = static_findings("import os\nimport gc; gc.get_objects()\nos._exit(0)\n")
    assert [f.line for f in findings] == [2, 3]
    assert findings[0].what == "import gc"


def test_static_scan_leaves_syntax_errors_to_the_worker() -> None:
    assert static_findings("def broken(:\n") == []


# ---------------------------------------------------------------------------------------- snapshots


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


def test_thread_watch_tracks_threads_the_candidate_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(threading.Thread, "start", threading.Thread.start)  # undone after the test
    prefix = str(tmp_path / "candidate_")
    watch = ThreadWatch(prefix)
    watch.install()
    release = threading.Event()
    candidate = compile(textwrap.dedent("""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        def launch(release):
            threading.Thread(target=release.wait, name="direct").start()
            pool = ThreadPoolExecutor(1, thread_name_prefix="pooled")
            pool.submit(release.wait)  # started inside the standard library, on the candidate's behalf
            return pool
    """), prefix + "abc/cand.py", "exec")
    namespace: dict = {}
    exec(candidate, namespace)
    pool = namespace["launch"](release)
    ours = threading.Thread(target=release.wait, name="framework")  # started by code that is not the candidate's
    ours.start()
    try:
        assert sorted(watch.running()) == ["direct", "pooled_0"]
    finally:
        release.set()
        pool.shutdown(wait=True)
        ours.join()
    for thread in watch.started:
        thread.join(timeout=5)
    assert watch.running() == []


# ------------------------------------------------------------------------------------ audit guard

AUDIT_CANDIDATE = '''
import gc, inspect, sys, traceback, warnings
from collections import namedtuple
from dataclasses import dataclass
from typing import TypeVar


def attempt(name, fn, results):
    try:
        fn()
        results[name] = "allowed"
    except PermissionError as exc:
        results[name] = str(exc)


def tb_frame():
    try:
        raise ValueError
    except ValueError as exc:
        return exc.__traceback__.tb_frame


def gen():
    yield 1


def make_dataclass():
    @dataclass
    class Point:
        x: int = 0
    return Point


def run(results):
    attempt("sys._getframe", lambda: sys._getframe(0), results)
    attempt("tb_frame", tb_frame, results)
    attempt("gi_frame", lambda: gen().gi_frame, results)
    attempt("inspect.currentframe", inspect.currentframe, results)
    attempt("inspect.stack", inspect.stack, results)
    attempt("traceback.walk_stack", lambda: next(traceback.walk_stack(None)), results)
    attempt("sys._current_frames", sys._current_frames, results)
    attempt("gc.get_objects", gc.get_objects, results)
    attempt("gc.get_referrers", lambda: gc.get_referrers(results), results)
    attempt("namedtuple", lambda: namedtuple("P", "x y"), results)
    attempt("TypeVar", lambda: TypeVar("T"), results)
    attempt("dataclass", make_dataclass, results)
    attempt("warnings.warn", lambda: warnings.warn("w", stacklevel=2), results)
    attempt("traceback.format_exc", traceback.format_exc, results)
'''

AUDIT_DRIVER = '''
import gc, json, sys
from kforge_bot.evaluate.guards import AuditGuard

prefix, source = sys.argv[1], open(sys.argv[2]).read()
guard = AuditGuard(prefix)
guard.install()
namespace = {"__name__": "cand"}
exec(compile(source, prefix + "abc/cand.py", "exec"), namespace)
results = {}
namespace["run"](results)
results["harness sys._getframe"] = "allowed" if sys._getframe(0) is not None else "?"
results["harness gc.get_objects"] = "allowed" if gc.get_objects() else "?"
results["refused"] = guard.refused
print(json.dumps(results))
'''


def test_audit_guard_refuses_frames_and_gc_to_the_candidate_only(tmp_path: Path) -> None:
    # An audit hook stays for the life of its process: run it in a child, not in the test process.
    (tmp_path / "cand.py").write_text(AUDIT_CANDIDATE)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", AUDIT_DRIVER, str(tmp_path / "candidate_"),
                          str(tmp_path / "cand.py")], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)
    for refused in ("sys._getframe", "tb_frame", "gi_frame", "inspect.currentframe", "inspect.stack",
                    "traceback.walk_stack", "sys._current_frames", "gc.get_objects", "gc.get_referrers"):
        assert results[refused].startswith("kforge-bot: refused "), (refused, results[refused])
        assert "(candidate line " in results[refused]
    assert "through inspect.currentframe()" in results["inspect.currentframe"]
    for allowed in ("namedtuple", "TypeVar", "dataclass", "warnings.warn", "traceback.format_exc",
                    "harness sys._getframe", "harness gc.get_objects"):
        assert results[allowed] == "allowed", (allowed, results[allowed])
    assert len(results["refused"]) == 9
