"""`env:` is an allowlist (kforge_bot/kernelspec/env.py): a library's own settings, never the runtime's. Each name here
is one an attacker with a manifest would reach for; the old blocklist let ATEN_CPU_CAPABILITY, DNNL_MAX_CPU_ISA,
OPENBLAS_NUM_THREADS, CPATH, GCONV_PATH, BASH_ENV, GIT_SSH_COMMAND, MASTER_ADDR and any unrelated name through."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import load_manifest
from kforge_bot.kernelspec.env import allowed_prefixes, check_env

LIBRARY = Path(__file__).parents[1] / "data" / "library_keywords"
MANIFEST = Path("repo/kforge.yaml")

# name -> what setting it would do to a worker
ATTACKS = {
    "LD_PRELOAD": "load a library into every process the worker starts (a compiler, Triton's launcher build)",
    "PYTHONPATH": "put another folder before the library on a child's path",
    "PYTHONWARNINGS": "import a module named in a warning filter",
    "CUDA_VISIBLE_DEVICES": "move the worker to another GPU than the one the gate reserved",
    "CUDA_LAUNCH_BLOCKING": "slow every launch: the timing of both sides changes",
    "TORCH_SHOW_CPP_STACKTRACES": "a torch debug knob",
    "TORCHINDUCTOR_MAX_AUTOTUNE": "what torch.compile does in a reference",
    "TRITON_INTERPRET": "run the base's Triton kernels in the interpreter: any candidate looks fast",
    "OMP_NUM_THREADS": "the threads a CPU side gets",
    "NVIDIA_TF32_OVERRIDE": "the precision matmuls run at",
    "ATEN_CPU_CAPABILITY": "which vector ISA torch's CPU kernels use: a slower reference",
    "DNNL_MAX_CPU_ISA": "which ISA oneDNN uses",
    "OPENBLAS_NUM_THREADS": "BLAS threads",
    "CC": "the C compiler Triton builds its launcher with: a program of the manifest's choice",
    "NVCC_PREPEND_FLAGS": "flags every nvcc run gets (-include a file)",
    "CPATH": "headers from elsewhere in every C build",
    "GCONV_PATH": "glibc loads code from this folder on a charset conversion",
    "BASH_ENV": "a file every bash the worker starts runs first",
    "GIT_SSH_COMMAND": "a command git runs",
    "GLIBC_TUNABLES": "the allocator's behaviour (and its bugs)",
    "MASTER_ADDR": "where a distributed init connects",
    "KFORGE_CACHE_DIR": "the bot's own settings",
    "GITHUB_TOKEN": "a credential's name",
    "HTTPS_PROXY": "where a download goes",
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_the_runtimes_own_names_are_refused_whatever_the_package(name: str) -> None:
    """Even for a package whose prefix would match (`ld`, `cuda`, `torchinductor`, ...): the reserved names win."""
    packages = {"kwlib", name.split("_")[0].lower()}
    with pytest.raises(KforgeError) as caught:
        check_env({name: "1"}, "kernels.k", MANIFEST, packages)
    text = str(caught.value)
    assert text.startswith(f"{MANIFEST}: kernels.k.env: {name} ") and "\n" not in text
    assert "docs/libraries.md" in text  # the fix


def test_a_name_outside_the_librarys_prefixes_is_refused_naming_what_is_allowed() -> None:
    """The old blocklist let any other name through (OTHERLIB_MODE, a lower-risk stand-in for the many it missed)."""
    with pytest.raises(KforgeError, match=r"kernels\.k\.env: OTHERLIB_MODE is not a setting of the kernel's library "
                                          r"\(allowed: KWLIB_\*\)"):
        check_env({"OTHERLIB_MODE": "fast"}, "kernels.k", MANIFEST, {"kwlib"})
    with pytest.raises(KforgeError, match=r"allowed: none: the kernel is in no package"):
        check_env({"KWLIB_MODE": "fast"}, "kernels.k", MANIFEST, set())


def test_a_librarys_own_and_documented_settings_are_allowed() -> None:
    assert check_env({"KWLIB_BACKEND": "stand-in", "KWLIB_LEVEL": 2, "KWLIB_ON": True}, "kernels.k", MANIFEST,
                     {"kwlib"}) == {"KWLIB_BACKEND": "stand-in", "KWLIB_LEVEL": "2", "KWLIB_ON": "true"}
    # FlagGems reads GEMS_VENDOR, Liger-Kernel LIGER_RMS_*: prefixes other than their packages' names.
    assert allowed_prefixes({"flag_gems"}) == ("FLAG_GEMS_", "GEMS_", "FLAGGEMS_")
    assert check_env({"GEMS_VENDOR": "nvidia"}, "kernels.k", MANIFEST, {"flag_gems"}) == {"GEMS_VENDOR": "nvidia"}
    assert check_env({"LIGER_RMS_FORCE_NO_FAST": "1"}, "kernels.k", MANIFEST, {"liger_kernel"})
    with pytest.raises(KforgeError, match="GEMS_VENDOR is not a setting"):
        check_env({"GEMS_VENDOR": "nvidia"}, "kernels.k", MANIFEST, {"kwlib"})


@pytest.mark.parametrize("value", ["a\nb", "x" * 300, ["list"], {"a": 1}])
def test_values_are_short_printable_scalars(value: object) -> None:
    with pytest.raises(KforgeError, match=r"kernels\.k\.env\.KWLIB_MODE: expected a printable value"):
        check_env({"KWLIB_MODE": value}, "kernels.k", MANIFEST, {"kwlib"})


def test_a_manifest_gets_its_kernels_package_prefix_and_nothing_else(tmp_path: Path) -> None:
    """Through load_manifest: the package is the kernel's module's (kwlib.ops.act), the error names the file."""
    shutil.copytree(LIBRARY, tmp_path / "lib")
    path = tmp_path / "lib" / "kforge.yaml"
    assert load_manifest(path)["gelu_tanh"].env == {"KWLIB_BACKEND": "stand-in"}
    data = yaml.safe_load(path.read_text())
    data["kernels"]["gelu_tanh"]["env"] = {"KWLIB_BACKEND": "stand-in", "LD_PRELOAD": "/tmp/x.so"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(KforgeError, match=rf"^{path}: kernels\.gelu_tanh\.env: LD_PRELOAD is the runtime's own"):
        load_manifest(path)
