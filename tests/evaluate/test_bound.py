"""The hardware floor: compulsory traffic over peak bandwidth, and where it honestly applies."""

from __future__ import annotations

import pytest

from kforge_bot.evaluate import bound

L2 = 60 << 20  # the H200's


@pytest.fixture(autouse=True)
def _no_saved_ceilings(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no doctor --save figures: the datasheet's 4800 GB/s
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(bound.ENV_CEILINGS, raising=False)


def test_layernorms_floor_on_an_h200_is_its_traffic_at_the_datasheet_bandwidth() -> None:
    traffic = 16 * 64 * 256 * 256 * 4 * 2  # KernelBench L1 40: fp32 input read once, output written once
    (floor,) = bound.floors("cuda", "NVIDIA H200", L2, [traffic], [1], 3)
    assert floor.bandwidth_gbs == 4800 and "h200 datasheet" in floor.source
    assert floor.ms == pytest.approx(0.1118, abs=1e-4)
    assert bound.violation(floor, 0.374) is None  # torch.compile's measured 0.374 ms is possible
    reason = bound.violation(floor, 0.05)
    assert reason and "below the hardware's floor of 111.85 us" in reason and "4800 GB/s" in reason


def test_no_floor_where_a_samples_calls_can_share_the_cache_or_nothing_is_known() -> None:
    small = 4 << 20  # three rotated sets of 4 MB fit in the L2: k calls in one sample may hit it
    assert bound.floors("cuda", "NVIDIA H200", L2, [small], [8], 3) == []
    assert len(bound.floors("cuda", "NVIDIA H200", L2, [small], [1], 3)) == 1  # one call per flushed sample
    assert len(bound.floors("cuda", "NVIDIA H200", L2, [200 << 20], [8], 3)) == 1  # far over the cache
    assert bound.floors("cuda", "Some Unknown GPU", L2, [200 << 20], [1], 3) == []
    assert bound.floors("cpu", "Intel(R) Xeon(R)", None, [200 << 20], [1], 3) == []  # CPUs: no honest floor
    assert bound.floors("cuda", "NVIDIA H200", L2, [None], [1], 3) == []
