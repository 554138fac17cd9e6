"""The evaluation pool on CPU slots: real evaluations in sandboxed children, real slot processes.

Candidates that crash (SIGSEGV), hang past the timeout and kill their slot process (SIGKILL to the parent)
are reported as that candidate's verdict; the queued jobs behind them still run, on a replaced slot.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kforge_bot.errors import KforgeError
from kforge_bot.evaluate import isolation
from kforge_bot.evaluate.result import EvalSettings
from kforge_bot.scale import pool as pool_mod
from kforge_bot.scale.pool import Device, EvalPool, discover_devices
from kforge_bot.spec import load_spec

KERNEL = '''"""x * 2, in torch: a kernel whose candidates are cheap to evaluate."""
import torch


def double(x):
    return x * 2.0


def reference(x):
    return x + x


def make_inputs(n):
    return [torch.randn(n)]
'''

MANIFEST = """version: 1
kernels:
  double:
    file: double.py
    entry: double
    reference: double.py:reference
    inputs: double.py:make_inputs
    shapes:
      - {n: 4096}
    targets: [cpu]
    seeds: 2
"""

# Correct only when the child sees the slot's device pinned: proves the visibility variable reaches it.
PINNED = KERNEL.replace("    return x * 2.0\n", "    import os\n    seen = os.environ.get('CUDA_VISIBLE_DEVICES')\n"
                        "    return x * (2.0 if seen in ('5', '6') else 3.0)\n", 1)
SEGFAULT = KERNEL.replace("    return x * 2.0\n", "    import ctypes\n    ctypes.string_at(0)\n    return x * 2.0\n", 1)
HANG = KERNEL.replace("    return x * 2.0\n", "    import time\n    time.sleep(600)\n    return x * 2.0\n", 1)
# Kills the slot process that started this evaluation (its parent), as a hostile candidate could.
KILL_SLOT = KERNEL.replace("    return x * 2.0\n", "    import ctypes, os, time\n"
                           "    ctypes.CDLL(None)['ki' + 'll'](os.getppid(), 9)\n    time.sleep(600)\n"
                           "    return x * 2.0\n", 1)
SETTINGS = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=12)


@pytest.fixture
def spec(tmp_path: Path):
    (tmp_path / "double.py").write_text(KERNEL)
    (tmp_path / "kforge.yaml").write_text(MANIFEST)
    return load_spec(tmp_path / "kforge.yaml")


def variant(spec, source: str, tag: str):
    # A distinct source per job (a comment), so no two jobs are the same candidate.
    return spec.candidate_from_source(source + f"# {tag}\n")


def test_slots_survive_crash_hang_and_a_killed_slot_without_losing_the_queue(spec) -> None:
    seeds = [11, 12]
    devices = [Device("cuda", "5", "fake pinned 5"), Device("cuda", "6", "fake pinned 6")]
    with EvalPool("cpu", devices=devices, compile_ahead=False) as pool:
        jobs = {"good0": PINNED, "segfault": SEGFAULT, "kill_slot": KILL_SLOT, "hang": HANG, "good1": PINNED}
        # Inside the sandbox a candidate cannot see, let alone kill, its slot (kill_slot_boxed below): the
        # slot-replacement path is exercised with the sandbox off, as on a machine without bubblewrap.
        unboxed = replace(SETTINGS, isolation="off")
        futures = {name: pool.submit(spec, variant(spec, src, name), unboxed if name == "kill_slot" else SETTINGS,
                                     seeds) for name, src in jobs.items()}
        if isolation.probe().available:
            futures["kill_slot_boxed"] = pool.submit(spec, variant(spec, KILL_SLOT, "boxed"), SETTINGS, seeds)
        done = {name: f.result(timeout=120) for name, f in futures.items()}
        replaced = pool.replaced

    for name in ("good0", "good1"):
        assert done[name].result.verdict == "pass", (name, done[name].result.reason)
    assert done["segfault"].result.verdict == "crash"
    assert "SIGSEGV" in done["segfault"].result.reason
    assert done["hang"].result.verdict == "timeout"
    killed = done["kill_slot"].result
    assert killed.verdict == "crash" and "died (killed by SIGKILL)" in killed.reason and "replaced" in killed.reason
    assert replaced == 1
    if "kill_slot_boxed" in done:
        assert done["kill_slot_boxed"].result.verdict == "timeout"  # its kill reached nothing; it slept on
    # One job at a time per device; both devices busy at once.
    by_device: dict[str, list[tuple[float, float]]] = {}
    for r in done.values():
        by_device.setdefault(r.device, []).append((r.started, r.finished))
    assert set(by_device) == {"5", "6"}
    for spans in by_device.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    overlap = any(a0 < b1 and b0 < a1 for a0, a1 in by_device["5"] for b0, b1 in by_device["6"])
    assert overlap
    # No evaluation child of the killed slot is left running.
    assert pool_mod.kill_marked("never-used") == 0


def test_abort_cancels_the_queue_and_kills_the_running_job_at_once(spec) -> None:
    """What an interrupted optimize run does with its pool: no waiting for results nobody will read."""
    pool = EvalPool("cpu", devices=[Device("cpu", "", "cpu slot 0")], compile_ahead=False)
    running = pool.submit(spec, variant(spec, HANG, "running"), SETTINGS, [1, 2])
    queued = pool.submit(spec, variant(spec, KERNEL, "queued"), SETTINGS, [1, 2])
    deadline = time.monotonic() + 60
    while pool.slots[0].process is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # the slot is at work on the hanging job
    mark = pool.slots[0].mark
    started = time.monotonic()
    pool.abort()
    assert time.monotonic() - started < 5.0  # its timeout is 12 s
    assert queued.cancelled()
    with pytest.raises(KforgeError, match="closed while this candidate was being evaluated"):
        running.result(timeout=1)
    assert pool_mod.kill_marked(mark) == 0  # the slot and its evaluation children are gone
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(spec, variant(spec, KERNEL, "late"), SETTINGS, [1, 2])


BUILDS = '''"""Builds a shared library at import, into TORCH_EXTENSIONS_DIR, as load_inline would; logs each build."""
import ctypes
import os
import subprocess
from pathlib import Path

import torch

VARIANT = 1
folder = Path(os.environ["TORCH_EXTENSIONS_DIR"])
folder.mkdir(parents=True, exist_ok=True)
lib = folder / "k.so"
if not lib.exists():
    src = folder / "k.c"
    src.write_text("double twice(double v) { return v * %d; }" % (VARIANT + 1))
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    with open(folder / "builds.log", "a") as log:
        log.write("built with CUDA_VISIBLE_DEVICES=%r\\n" % os.environ.get("CUDA_VISIBLE_DEVICES"))
_twice = ctypes.CDLL(str(lib)).twice
_twice.restype = ctypes.c_double
_twice.argtypes = [ctypes.c_double]


def double(x):
    return x * _twice(1.0)


def reference(x):
    return x + x


def make_inputs(n):
    return [torch.randn(n)]
'''


def test_compile_ahead_builds_on_the_cpu_and_the_slot_finds_the_build(tmp_path: Path) -> None:
    (tmp_path / "double.py").write_text(BUILDS)
    (tmp_path / "kforge.yaml").write_text(MANIFEST)
    spec = load_spec(tmp_path / "kforge.yaml")
    candidate = spec.candidate_from_source(BUILDS.replace("# kforge", "# kforge") + "# a distinct candidate\n")
    scratch = tmp_path / "scratch"
    with EvalPool("cpu", devices=[Device("cuda", "4", "fake")], compile_ahead=True, scratch=scratch) as pool:
        done = pool.submit(spec, candidate, SETTINGS, [3, 4]).result(timeout=120)
    assert done.result.verdict == "pass", done.result.reason
    assert done.prepare == "built" and done.prepare_s is not None
    import hashlib

    digest = hashlib.sha256(candidate.source.encode()).hexdigest()[:12]
    log = (scratch / "extensions" / digest / "builds.log").read_text().splitlines()
    # Built once, ahead, with no GPU visible; the evaluation on device 4 imported it without rebuilding.
    assert log == ["built with CUDA_VISIBLE_DEVICES=''"]
    base_digest = hashlib.sha256(spec.baseline.source.encode()).hexdigest()[:12]
    assert (scratch / "extensions" / base_digest / "builds.log").read_text().splitlines() == \
        ["built with CUDA_VISIBLE_DEVICES=''"]


def test_device_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [d.visible for d in discover_devices("cpu")] == [""]
    assert len(discover_devices("cpu", 3)) == 3
    rows = [("NVIDIA H200", "9.0"), ("NVIDIA H200", "9.0"), ("NVIDIA A10", "8.6")]
    monkeypatch.setattr(pool_mod, "_query_devices", lambda kind, env: rows)
    found = discover_devices("cuda", environ={"CUDA_VISIBLE_DEVICES": "2,5,7"})
    assert [(d.visible, d.name, d.capability) for d in found] == [("2", "NVIDIA H200", "9.0"),
                                                                   ("5", "NVIDIA H200", "9.0")]
    assert [d.visible for d in discover_devices("cuda", 1, environ={})] == ["0"]
    with pytest.raises(KforgeError, match="must never share"):
        discover_devices("cuda", 3, environ={})
    monkeypatch.setattr(pool_mod, "_query_devices", lambda kind, env: [])
    with pytest.raises(KforgeError, match="no cuda device"):
        discover_devices("cuda", environ={})


def test_no_gpu_here_is_a_clear_error() -> None:
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("this machine has a GPU")
    with pytest.raises(KforgeError, match="no cuda device is visible"):
        discover_devices("cuda")
