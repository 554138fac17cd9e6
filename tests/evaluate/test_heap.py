"""The worker's heap keeps what it frees (evaluate.worker.heap): what one timed sample frees, the next one's allocations
reuse, so no sample pays page faults for the state the harness's bookkeeping left the heap in. The page faults
themselves vary with each process's layout (benchmarks/results/aa_layouts_cpu.md); what the fix changes, and what
this test reads, is where freed memory goes: back to the system, or kept in the heap for the next allocation."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter (this one's heap has been shaped by every test before): blocks of 1, 4 and 16 MB, each
# written, freed, then glibc's count of free bytes it keeps in its heap (mallinfo2's fordblks).
PROBE = textwrap.dedent("""\
    import ctypes, sys
    from kforge_bot.evaluate.worker.heap import hold_freed_memory
    held = hold_freed_memory() if sys.argv[1] == "held" else False
    libc = ctypes.CDLL(None)
    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                         "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
    libc.free.argtypes = (ctypes.c_void_p,)
    kept = []
    for mb in (1, 4, 16):
        block = libc.malloc(mb << 20)
        ctypes.memset(block, 1, mb << 20)
        libc.free(block)
        kept.append(libc.mallinfo2().fordblks >= mb << 20)
    print(held, *kept)
""")


def probe(mode: str) -> tuple[bool, list[bool]]:
    """(whether the heap was told to hold freed memory, per block whether its bytes stayed in the heap once freed)."""
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, cwd=ROOT, check=True,
                         timeout=120).stdout.split()
    return out[0] == "True", [word == "True" for word in out[1:]]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc settings")
def test_freed_blocks_stay_in_the_heap_for_the_next_call() -> None:
    held, kept = probe("held")
    if not held:
        pytest.skip("this C library has no mallopt thresholds (not glibc)")
    assert kept == [True, True, True], "a freed block went back to the system: the next call maps it afresh"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc settings")
def test_the_probe_sees_memory_go_back_where_nothing_holds_it() -> None:
    """Without the setting, glibc maps these blocks on their own and unmaps them when freed: the probe can fail."""
    held, kept = probe("free")
    assert not held and kept == [False, False, False]
