"""The CUDA settle's plan (how many flushes, how long a spin, what it expects), and its persisting-L2 reset, whose
logic runs against a compiled stand-in for the driver's three calls.

On the H200 the reset itself is tested in tests/test_gpu.py (a candidate's persisting lines no longer slow the
baseline); here, on any machine with a C compiler, which calls it makes in which case, and that it never raises.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import shutil
import subprocess
from pathlib import Path

import pytest

from kforge_bot.targets import cuda
from kforge_bot.targets.cuda import _bind_persisting_l2_reset, settle_plan

# The driver's signatures (cuda.h); `fail_get` and `limit` steer it, `calls` records what was asked, in order.
STAND_IN = r"""
#include <stddef.h>
size_t limit = 0; int fail_get = 0; char calls[64]; int n = 0;
int cuCtxGetLimit(size_t *value, int which) { calls[n++] = 'g'; if (fail_get || which != 6) return 215;
                                                *value = limit; return 0; }
int cuCtxSetLimit(int which, size_t value) { calls[n++] = 's'; if (which != 6) return 1; limit = value; return 0; }
int cuCtxResetPersistingL2Cache(void) { calls[n++] = 'r'; return 0; }
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler for the driver stand-in")
    folder = tmp_path_factory.mktemp("driver")
    (folder / "driver.c").write_text(STAND_IN)
    subprocess.run([compiler, "-shared", "-fPIC", str(folder / "driver.c"), "-o", str(folder / "libdriver.so")],
                   check=True)
    return folder / "libdriver.so"


def _state(lib: ctypes.CDLL) -> tuple[str, int]:
    calls = ctypes.c_char.in_dll(lib, "calls")
    count = ctypes.c_int.in_dll(lib, "n").value
    text = ctypes.string_at(ctypes.addressof(calls), count).decode()
    ctypes.c_int.in_dll(lib, "n").value = 0
    return text, ctypes.c_size_t.in_dll(lib, "limit").value


def test_a_reserved_carveout_is_released_and_persisting_lines_demoted(driver: Path) -> None:
    reset = _bind_persisting_l2_reset(str(driver))
    lib = ctypes.CDLL(str(driver))  # the same loaded library: its globals are the stand-in's state
    assert reset is not None
    ctypes.c_size_t.in_dll(lib, "limit").value = 37 << 20  # a candidate reserved 37 MiB
    assert reset() is True
    assert _state(lib) == ("gsr", 0)  # read, released, demoted
    assert reset() is True
    assert _state(lib) == ("gr", 0)  # nothing reserved: no set, the lines still demoted


def test_a_driver_without_persisting_l2_is_left_alone_and_the_settle_goes_on(driver: Path) -> None:
    reset = _bind_persisting_l2_reset(str(driver))
    lib = ctypes.CDLL(str(driver))
    assert reset is not None
    ctypes.c_int.in_dll(lib, "fail_get").value = 1  # CUDA_ERROR_UNSUPPORTED_LIMIT, as before Ampere
    try:
        assert reset() is False
        assert _state(lib)[0] == "g"
    finally:
        ctypes.c_int.in_dll(lib, "fail_get").value = 0


def test_no_driver_binds_nothing(tmp_path: Path) -> None:
    assert _bind_persisting_l2_reset(str(tmp_path / "libcuda-absent.so")) is None
    libc = ctypes.util.find_library("c")  # a library without the three functions (a driver older than CUDA 11)
    assert libc and _bind_persisting_l2_reset(libc) is None


BASE = {"flush_ms": 0.0833, "spin_cycles_per_ms": 1.755e6}  # an H100's 256 MB fill and spin, one worker's figures
HEAD = {"flush_ms": 0.0836, "spin_cycles_per_ms": 1.740e6}  # another worker's, on the same device


def test_two_workers_planning_from_their_own_figures_differ_and_from_the_base_s_agree() -> None:
    # The H100's A/A gate decisions (benchmarks/results/gate_hidden_work_h100.md): one 1 ms settle rounded to 12
    # flushes in one worker and 13 in the other; with each expecting its own figure, a 4% error in one worker's
    # flush measure left 42 us between honest sides.
    base, head = settle_plan(1.0, BASE), settle_plan(1.0, HEAD)
    assert (base.flushes, head.flushes) == (13, 12)
    shared = settle_plan(1.0, HEAD, BASE)
    assert shared == base and shared.expected_ms == pytest.approx(13 * 0.0833)


def test_a_long_lead_spins_the_same_cycles_on_both_sides() -> None:
    lead = cuda.MAX_FLUSH_LEAD_MS + 10.0
    base, head = settle_plan(lead, BASE, BASE), settle_plan(lead, HEAD, BASE)
    assert base == head and base.spin_cycles == int(10.0 * BASE["spin_cycles_per_ms"])
    assert base.expected_ms == pytest.approx(base.flushes * 0.0833 + 10.0)


def test_figures_out_of_sense_are_ignored_for_the_own() -> None:
    for figures in ({"flush_ms": 0.01}, {"flush_ms": 1.0}, {"flush_ms": float("nan")}, {"flush_ms": "x"}, {}, None):
        assert settle_plan(1.0, HEAD, figures).flushes == 12, figures  # type: ignore[arg-type]
