"""unitrace's metric query (Intel GPUs) into the digest rows the CUDA counters use (kforge_bot.counters.unitrace_parse).
The data is written in unitrace's format with invented values (tests/data/unitrace/README.md): not a recording."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_bot.counters import ncu_parse
from kforge_bot.counters.unitrace_parse import UnitraceOutputError, parse_query, permission_problem

QUERY = (Path(__file__).parents[1] / "data" / "unitrace" / "perfquery_format.csv").read_text()
B580_GBS = 456.0  # the datasheet's GDDR6 bandwidth (hardware_runners/arc-b580/runner.yml)


def test_each_kernel_instance_becomes_a_row_with_the_cuda_digests_keys() -> None:
    rows = {r["kernel"]: r for r in parse_query(QUERY, B580_GBS)}
    assert list(rows) == ["_softmax_kernel", "triton_poi_fused_add_0", "_matmul_kernel"]  # sub-device 1 dropped
    softmax = rows["_softmax_kernel"]
    assert softmax["duration_us"] == pytest.approx(400.0)
    assert (softmax["grid_size"], softmax["block_size"], softmax["simd_width"]) == (8192, 128, 32)
    # 128 MiB moved in 400 us: 335.5 GB/s, 73.6% of 456 GB/s
    assert softmax["dram_throughput_pct"] == pytest.approx(100 * 134217728 / 400_000 / 456.0)
    assert softmax["memory_throughput_pct"] == softmax["dram_throughput_pct"]
    assert softmax["sm_throughput_pct"] == 22.5  # the busiest pipe (ALU0), as ncu's SM figure is
    assert softmax["achieved_occupancy_pct"] == 88.0
    assert softmax["l2_hit_rate_pct"] == pytest.approx(12.0) and softmax["l1_hit_rate_pct"] == pytest.approx(25.0)
    assert (softmax["xve_active_pct"], softmax["xve_stall_pct"], softmax["gpu_frequency_mhz"]) == (61.5, 35.2, 2850)
    assert rows["_matmul_kernel"]["grid_size"] == 4096 * 8 and rows["_matmul_kernel"]["sm_throughput_pct"] == 81.0
    # Not in the query: absent, never a measured zero.
    assert not {"registers_per_thread", "spills", "stalls"} & set(softmax)


def test_the_roofline_class_summary_and_table_read_them_as_they_read_ncus() -> None:
    rows = parse_query(QUERY, B580_GBS)
    classes = {r["kernel"]: ncu_parse.classify(r) for r in rows}
    assert classes == {"_softmax_kernel": "memory-bound", "triton_poi_fused_add_0": "latency-bound",
                       "_matmul_kernel": "compute-bound"}
    digest = ncu_parse.summary(rows)
    assert digest["dominant"] == "_matmul_kernel" and digest["class"] == "compute-bound"
    assert digest["total_us"] == pytest.approx(1340.0) and digest["speed_of_light"] == pytest.approx(0.81)
    table = ncu_parse.table(None, rows)
    assert "| `_softmax_kernel` | 400.0 | 73.6 | 22.5 | 88.0 | - | - | - | memory-bound |" in table


def test_without_the_devices_peak_there_is_no_percentage_of_it() -> None:
    softmax = parse_query(QUERY)[0]
    assert softmax["dram_read_bytes"] == 67108864 and "dram_throughput_pct" not in softmax
    assert ncu_parse.classify(softmax) == "latency-bound"  # judged from what was measured, not a guessed peak


def test_output_without_metric_rows_is_an_error_not_an_empty_digest() -> None:
    with pytest.raises(UnitraceOutputError, match="no kernel rows"):
        parse_query("[INFO] Kernel metrics are stored in perfquery.1.csv\n\n=== Device #0 Metrics ===\n")
    with pytest.raises(UnitraceOutputError):
        parse_query("Kernel,GlobalInstanceId,SubDeviceId,GpuTime[ns]\n")


def test_counters_kept_from_ordinary_users_are_named_with_the_fix() -> None:
    why = permission_problem({"/proc/sys/dev/xe/observation_paranoid": "1\n"}, is_root=False)
    assert why is not None and "sysctl dev.xe.observation_paranoid=0" in why and "\n" not in why
    assert permission_problem({"/proc/sys/dev/xe/observation_paranoid": "1\n"}, is_root=True) is None
    assert permission_problem({"/proc/sys/dev/i915/perf_stream_paranoid": "0\n"}, is_root=False) is None
    assert "dev.i915.perf_stream_paranoid" in permission_problem({"/proc/sys/dev/i915/perf_stream_paranoid": "1"},
                                                                 is_root=False)
