"""The fixed Nsight Compute metric set kforge-bot collects, and what each is for.

One table, read by the collector (which asks ncu for exactly these), the parser (which names them in the
digest) and the docs. Names are ncu's own metric names for Hopper and Blackwell (sm_90, sm_100); a name a
given ncu does not know is left out of its run and reported, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    key: str  # the digest's name for it
    ncu: str  # ncu's metric name
    unit: str  # of the digest's value (converted from ncu's)
    why: str  # what it tells the analyst or the tuner


METRICS: tuple[Metric, ...] = (
    Metric("duration_us", "gpu__time_duration.sum", "us", "the kernel's time on the device (one call, clocks unlocked)"),
    Metric("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%",
           "compute speed of light: the busiest SM pipeline against its peak"),
    Metric("memory_throughput_pct", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%",
           "memory speed of light: the busiest memory unit (L1, L2, DRAM) against its peak"),
    Metric("dram_throughput_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%",
           "DRAM bandwidth used against its peak: near 100% a memory-bound kernel is done"),
    Metric("dram_read_bytes", "dram__bytes_read.sum", "B", "bytes read from DRAM (against the compulsory traffic)"),
    Metric("dram_write_bytes", "dram__bytes_write.sum", "B", "bytes written to DRAM"),
    Metric("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active", "%",
           "warps resident per SM against the hardware's maximum, as run"),
    Metric("theoretical_occupancy_pct", "sm__maximum_warps_per_active_cycle_pct", "%",
           "the occupancy the launch allows; its limiter is the smallest of the four limits below"),
    Metric("occupancy_limit_registers", "launch__occupancy_limit_registers", "blocks", "blocks per SM registers allow"),
    Metric("occupancy_limit_shared_mem", "launch__occupancy_limit_shared_mem", "blocks",
           "blocks per SM shared memory allows"),
    Metric("occupancy_limit_warps", "launch__occupancy_limit_warps", "blocks", "blocks per SM the warp count allows"),
    Metric("occupancy_limit_blocks", "launch__occupancy_limit_blocks", "blocks", "blocks per SM the block slots allow"),
    Metric("registers_per_thread", "launch__registers_per_thread", "", "registers each thread holds"),
    Metric("local_load_instructions", "smsp__sass_inst_executed_op_local_ld.sum", "",
           "loads from local memory: register spills (or local arrays) when above zero"),
    Metric("local_store_instructions", "smsp__sass_inst_executed_op_local_st.sum", "", "stores to local memory: spills"),
    Metric("shared_mem_static_bytes", "launch__shared_mem_per_block_static", "B", "static shared memory per block"),
    Metric("shared_mem_dynamic_bytes", "launch__shared_mem_per_block_dynamic", "B", "dynamic shared memory per block"),
    Metric("l1_hit_rate_pct", "l1tex__t_sector_hit_rate.pct", "%", "L1/texture sector hit rate"),
    Metric("l2_hit_rate_pct", "lts__t_sector_hit_rate.pct", "%", "L2 sector hit rate"),
    Metric("grid_size", "launch__grid_size", "blocks", "blocks launched"),
    Metric("block_size", "launch__block_size", "threads", "threads per block"),
    Metric("waves_per_sm", "launch__waves_per_multiprocessor", "", "grid size over what one wave of SMs holds"),
)

# Why warps wait: ncu's per-issue stall ratios (cycles a warp spent stalled for this reason per instruction
# issued). The digest keeps the top three per kernel.
STALL_REASONS: tuple[tuple[str, str], ...] = (
    ("long_scoreboard", "waiting on global or local memory (L1TEX): latency or bandwidth"),
    ("short_scoreboard", "waiting on shared memory or special math (MIO)"),
    ("barrier", "waiting at __syncthreads / tl barrier"),
    ("membar", "waiting on a memory fence"),
    ("mio_throttle", "the shared-memory / special-math queue is full"),
    ("lg_throttle", "the global/local memory queue is full: too many memory instructions"),
    ("math_pipe_throttle", "a math pipe is busy: compute-bound on that pipe"),
    ("wait", "a fixed-latency dependency"),
    ("not_selected", "eligible but another warp issued: enough parallelism"),
    ("no_instruction", "instruction cache miss or branch target"),
    ("dispatch_stall", "the dispatcher stalled"),
    ("drain", "waiting for memory stores to drain at exit"),
    ("branch_resolving", "waiting for a branch target"),
    ("imc_miss", "constant cache miss"),
    ("tex_throttle", "the texture queue is full"),
    ("sleeping", "warps asleep (nanosleep, yield)"),
    ("selected", "issued: the warp was not stalled"),
)


def stall_metric(reason: str) -> str:
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


def all_metric_names() -> list[str]:
    return [m.ncu for m in METRICS] + [stall_metric(reason) for reason, _ in STALL_REASONS]
