"""Where a kernel source holds tunable literals (kforge_bot.agents.tunable_sites)."""

from __future__ import annotations

from kforge_bot.agents.tunable_sites import kind_of
from kforge_bot.agents.tunables import find_tunables


def test_kinds_from_names():
    assert kind_of("ROWS_PER_PROGRAM", gpu=True) == "small"
    assert kind_of("ITEMS_PER_THREAD", gpu=True) == "small"
    assert kind_of("GROUP_SIZE_M", gpu=True) == "small"
    assert kind_of("BLOCK_SIZE_M", gpu=True) == "tile" and kind_of("BK", gpu=True) == "tile"
    assert kind_of("BLOCK_SIZE", gpu=True) == "block" and kind_of("TILE", gpu=False) == "block"
    assert kind_of("THREADS", gpu=True) == "gpu_threads" and kind_of("THREADS", gpu=False) == "threads"
    assert kind_of("THREADS_PER_BLOCK", gpu=False) == "gpu_threads"
    assert kind_of("NUM_WARPS", gpu=True) == "warps" and kind_of("NUM_STAGES", gpu=True) == "stages"
    for name in ("N", "M", "EPS", "SCALE", "HIDDEN", "SEED"):
        assert kind_of(name, gpu=True) is None
    src = "ROWS_PER_PROGRAM = 1\nEPS = 1e-5\nN = 4096\n"
    assert [t.name for t in find_tunables(src, "triton")] == ["ROWS_PER_PROGRAM"]
