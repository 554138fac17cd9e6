"""Other vendors' backend folders: a library's copies of its kernels for another accelerator
(`ops/backends/_ascend/`, `runtime/backend/_mthreads/`, `_hip/`, `xpu/`).

A file belongs to a vendor when a folder on its path is named for one (with or without a leading `_`, or as
`<vendor>_backend`). The vendor's manifest target is the device kind kforge-bot runs it on (`xpu` for Intel,
`cuda` for NVIDIA's own folder); a vendor no target runs (Ascend, MUSA, ROCm/HIP as of now, ...) has none,
and its files are left out of the proposal.
"""

from __future__ import annotations

import re

# Folder name (lower case, without a leading `_` or a `_backend(s)` suffix) -> vendor.
_VENDORS: dict[str, str] = {
    "ascend": "ascend", "npu": "ascend", "huawei": "ascend",
    "musa": "mthreads", "mthreads": "mthreads",
    "hip": "amd", "rocm": "amd", "amd": "amd", "hygon": "hygon", "dcu": "hygon",
    "xpu": "intel", "intel": "intel",
    "mlu": "cambricon", "cambricon": "cambricon",
    "kunlunxin": "kunlunxin", "kunlun": "kunlunxin", "iluvatar": "iluvatar", "corex": "iluvatar",
    "metax": "metax", "maca": "metax", "enflame": "enflame", "gcu": "enflame", "tsingmicro": "tsingmicro",
    "aipu": "aipu", "sunrise": "sunrise", "cpu_backend": "cpu",
    "arm": "arm", "aarch64": "arm", "arm64": "arm",  # an ARM CPU backend: no GPU target runs it
    "nvidia": "nvidia", "cuda": "nvidia",
}
# Vendor -> the manifest target that runs its kernels (absent: none does).
VENDOR_TARGETS: dict[str, str] = {"intel": "xpu", "nvidia": "cuda"}
# Names that only mean a vendor inside a `backend(s)`/`vendor(s)` folder (`cuda/` alone is often generic code).
_ONLY_UNDER_BACKENDS = {"nvidia", "cuda", "cpu_backend"}
_BACKEND_FOLDERS = {"backend", "backends", "vendor", "vendors", "_backend", "_backends"}


def _vendor_of_folder(folder: str) -> str | None:
    name = re.sub(r"^_+|_+backends?$", "", folder.lower())
    return _VENDORS.get(name)


def vendor_of(rel: str) -> str | None:
    """The vendor whose backend folder holds this repository-relative file, or None (generic code)."""
    folders = rel.split("/")[:-1]
    for i, folder in enumerate(folders):
        vendor = _vendor_of_folder(folder)
        if vendor is None:
            continue
        if vendor == "nvidia" or folder.lower().removeprefix("_") in _ONLY_UNDER_BACKENDS:
            if i == 0 or folders[i - 1].lower() not in _BACKEND_FOLDERS:
                continue
        return vendor
    return None


def vendor_target(vendor: str) -> str | None:
    """The manifest target kind that runs this vendor's kernels, or None."""
    return VENDOR_TARGETS.get(vendor)
