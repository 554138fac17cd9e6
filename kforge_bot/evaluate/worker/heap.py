"""The worker's heap keeps the memory it frees, so a timed call's allocations reuse pages already mapped.

glibc hands freed memory back to the system (a free stretch at the heap's top above its trim threshold, a block
above its mmap threshold, which it moves as blocks are freed) and maps fresh pages when memory is asked for again:
a call whose output lands in such pages pays a page fault for every 4 KiB of it, as much as the kernel's own work
for a short CPU kernel. Which samples pay depends on what the harness allocated and freed before them (the two
sides' checks keep different copies), not on the kernel timed: in A/A timings on the CPU, one side's samples in one
place of the pair faulted through most of a run and read twice as slow (issue 40). With both thresholds fixed,
freed blocks stay in the heap and are handed out again; blocks above MMAP_CEILING are mapped afresh by every call
that asks for one, on both sides alike.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_CEILING = 32 << 20  # glibc's largest mmap threshold on 64-bit hosts
NEVER_TRIM = (1 << 31) - 1  # mallopt takes an int: the largest trim threshold it can be given


def hold_freed_memory() -> bool:
    """Tell glibc's malloc to keep what is freed (no trim, a fixed mmap threshold). False where the C library has no
    such setting or refuses it (macOS, musl): there the heap behaves as before."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # The mmap threshold first: setting it stops glibc from moving both thresholds as large blocks are freed.
    return mallopt(M_MMAP_THRESHOLD, MMAP_CEILING) == 1 and mallopt(M_TRIM_THRESHOLD, NEVER_TRIM) == 1
