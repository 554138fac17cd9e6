"""Launch helpers: none of them launches a kernel."""

import triton


def is_hip() -> bool:
    return False


def get_num_warps(block: int) -> int:
    return 8 if block >= 2048 else 4


def calculate_settings(n: int) -> tuple[int, int]:
    BLOCK_SIZE = triton.next_power_of_2(n)
    num_warps = 4
    if BLOCK_SIZE >= 8192:
        num_warps = 16
    elif BLOCK_SIZE >= 2048:
        num_warps = 8
    return BLOCK_SIZE, num_warps
