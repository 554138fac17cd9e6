"""Other vendors' backend folders (kforge_bot.init.scan.vendors)."""

from __future__ import annotations

from kforge_bot.init.scan.vendors import vendor_of, vendor_target


def test_vendor_folders_and_their_targets() -> None:
    assert vendor_of("src/lib/ops/backends/_ascend/ops/rms_norm.py") == "ascend"
    assert vendor_of("src/flag_gems/runtime/backend/_mthreads/ops/add.py") == "mthreads"
    assert vendor_of("lib/_hip/softmax.py") == "amd" and vendor_of("lib/rocm/softmax.py") == "amd"
    assert vendor_of("lib/ops/xpu/softmax.py") == "intel" and vendor_target("intel") == "xpu"
    assert vendor_of("lib/backend/_nvidia/hopper/mm.py") == "nvidia" and vendor_target("nvidia") == "cuda"
    assert vendor_target("ascend") is None and vendor_target("amd") is None
    # Generic code: a `cuda/` folder outside a backends folder, a file named for a vendor, plain ops.
    assert vendor_of("lib/cuda/softmax.py") is None
    assert vendor_of("lib/ops/npu.py") is None
    assert vendor_of("lib/ops/rms_norm.py") is None
