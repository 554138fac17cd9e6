"""The CUDA settle's persisting-L2 reset, its logic run against a compiled stand-in for the driver's three calls.

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

from kforge_bot.targets.cuda import _bind_persisting_l2_reset

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
