"""No worker may touch the kernel's keyrings: a seccomp filter, set before any user code runs, that fails
add_key, request_key and keyctl with EPERM (as Docker's default profile refuses them).

Keyrings are not a file: neither bubblewrap's view nor a worker's own sandbox (evaluate.worker.own_sandbox) walls
them. Every worker kept the bot's session keyring, which links the user's persistent keyring: a candidate could
leave a key there for a later worker, or a later run of the bot, to read, and read what was kept there (found by a
red-team pass, twenty-ninth session). A filter is inherited by every process the worker starts and cannot be
lifted; it needs no_new_privs, which it sets. Any system call of another architecture than the worker's own (a
32-bit binary on x86_64, the x32 ABI) is failed as well, since its numbers are not these.
"""

from __future__ import annotations

import ctypes
import platform
import struct

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, EPERM = 0x7FFF0000, 0x00050000, 1
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x06
# The audit architecture a worker's own system calls carry, and its numbers of add_key, request_key and keyctl.
_ARCHES = {"x86_64": (0xC000003E, (248, 249, 250)), "aarch64": (0xC00000B7, (217, 218, 219))}
_X32_BIT = 0x40000000  # x86_64's x32 ABI: the same calls at other numbers


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def program(machine: str) -> bytes:
    """The filter for `machine` (platform.machine()) as struct sock_filter entries; KeyError for another."""
    arch, numbers = _ARCHES[machine]
    deny = 5 + len(numbers)  # the index of the final return, which fails the call; a jump counts from the next
    code = [(BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
            (BPF_JEQ_K, 0, deny - 2, arch),
            (BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
            (BPF_JGE_K, deny - 4, 0, _X32_BIT)]
    for i, number in enumerate(numbers):
        code.append((BPF_JEQ_K, deny - 5 - i, 0, number))
    code += [(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW), (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM)]
    return b"".join(struct.pack("HBBI", *op) for op in code)


def forbid_keyrings() -> bool:
    """Set the filter on this process (and all it starts). False where this machine's architecture has no filter
    here, or the kernel refused it."""
    try:
        filter_bytes = program(platform.machine())
    except KeyError:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(filter_bytes, len(filter_bytes))
    prog = _Program(len(filter_bytes) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0) != 0:
        return False
    return libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog), 0, 0) == 0
