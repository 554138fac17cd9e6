"""The kernel's keyrings are out of every worker's reach (evaluate.worker.syscall_filter)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from kforge_bot.evaluate.worker.syscall_filter import program

# In a session keyring of its own (so nothing is left in the user's), add a key: what a candidate did to leave data
# for a later worker in the bot's shared session keyring.
ADD_KEY = """
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long
numbers = {"x86_64": (248, 250), "aarch64": (217, 219)}[__import__("platform").machine()]
if sys.argv[1] == "filtered":
    from kforge_bot.evaluate.worker.syscall_filter import forbid_keyrings
    assert forbid_keyrings()
joined = libc.syscall(numbers[1], 1, None)  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
key = libc.syscall(numbers[0], b"user", b"kforge-probe", b"x", ctypes.c_size_t(1), ctypes.c_long(-3))
print(joined, key, errno.errorcode.get(ctypes.get_errno(), ""))
"""

needs_filter = pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"),
                                  reason=f"no filter for {platform.machine()} here")


@needs_filter
def test_a_worker_cannot_add_a_key_that_a_plain_process_can() -> None:
    plain = subprocess.run([sys.executable, "-c", ADD_KEY, "plain"], capture_output=True, text=True, check=True)
    joined, key, _ = plain.stdout.split() + [""] * (3 - len(plain.stdout.split()))
    assert int(joined) > 0 and int(key) > 0, plain.stdout  # the attack works on this machine without the filter
    filtered = subprocess.run([sys.executable, "-c", ADD_KEY, "filtered"], capture_output=True, text=True,
                              check=True)
    assert filtered.stdout.split() == ["-1", "-1", "EPERM"], filtered.stdout + filtered.stderr


def test_the_filter_is_whole_instructions_ending_in_its_two_returns() -> None:
    code = program("x86_64")
    assert len(code) % 8 == 0 and len(code) // 8 == 9  # arch, nr, x32, three calls, allow, fail
    with pytest.raises(KeyError):
        program("riscv64")
