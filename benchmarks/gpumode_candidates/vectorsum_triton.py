"""An honest vectorsum_py submission (GPU MODE pmpp_v2), ours: GPU MODE's public "correct" one returns the (1,)
output buffer where the reference returns a 0-dim sum, and fails their own check_implementation.

The reference upcasts the whole vector to float64 before summing (a read of 4 bytes, a write and a read of 8 per
element); this reads each float32 once and accumulates in float64 in registers, in two deterministic passes
(per-program partial sums, then one program sums those), so the answer is the reference's up to the order of the
float64 additions. Its ceiling over the reference is the bytes ratio, about 5x on large inputs.
"""

import torch
import triton
import triton.language as tl
from task import input_t, output_t

BLOCK = 4096
MAX_PARTIALS = 1024


@triton.jit
def _partial_sums(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    # Grid-stride loop: a fixed number of programs, so the second pass reads at most MAX_PARTIALS values.
    for start in range(pid * BLOCK, n, programs * BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0).to(tl.float64)
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _final_sum(partial_ptr, out_ptr, count, WIDTH: tl.constexpr):
    offsets = tl.arange(0, WIDTH)
    partials = tl.load(partial_ptr + offsets, mask=offsets < count, other=0.0)
    tl.store(out_ptr, tl.sum(partials, axis=0).to(tl.float32))


def custom_kernel(data: input_t) -> output_t:
    x, _ = data
    x = x.reshape(-1)
    programs = max(1, min(MAX_PARTIALS, triton.cdiv(x.numel(), BLOCK)))
    partials = torch.empty(programs, device=x.device, dtype=torch.float64)
    out = torch.empty((), device=x.device, dtype=torch.float32)
    _partial_sums[(programs,)](x, partials, x.numel(), BLOCK=BLOCK, num_warps=8)
    _final_sum[(1,)](partials, out, programs, WIDTH=MAX_PARTIALS)
    return out
