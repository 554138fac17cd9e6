"""Compile-ahead: a candidate that builds at import is built on the CPU, with no GPU in sight, before a slot
takes it; the slot then finds the build."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from fakes.pool_kernels import KERNEL, MANIFEST, SETTINGS, spec_in

from kforge_bot.scaleout.compile_ahead import needs_build
from kforge_bot.scaleout.devices import Device
from kforge_bot.scaleout.pool import EvalPool
from kforge_bot.kernelspec import load_spec



BUILDS = '''"""Builds a shared library at import, into TORCH_EXTENSIONS_DIR, as load_inline would; logs each build."""
import ctypes
import os
import subprocess
from pathlib import Path

import torch

VARIANT = 1
folder = Path(os.environ["TORCH_EXTENSIONS_DIR"])
folder.mkdir(parents=True, exist_ok=True)
lib = folder / "k.so"
if not lib.exists():
    src = folder / "k.c"
    src.write_text("double twice(double v) { return v * %d; }" % (VARIANT + 1))
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    with open(folder / "builds.log", "a") as log:
        log.write("built with CUDA_VISIBLE_DEVICES=%r\\n" % os.environ.get("CUDA_VISIBLE_DEVICES"))
_twice = ctypes.CDLL(str(lib)).twice
_twice.restype = ctypes.c_double
_twice.argtypes = [ctypes.c_double]


def double(x):
    return x * _twice(1.0)


def reference(x):
    return x + x


def make_inputs(n):
    return [torch.randn(n)]
'''


@pytest.mark.slow
def test_compile_ahead_builds_on_the_cpu_and_the_slot_finds_the_build(tmp_path: Path) -> None:
    (tmp_path / "double.py").write_text(BUILDS)
    (tmp_path / "kforge.yaml").write_text(MANIFEST)
    spec = load_spec(tmp_path / "kforge.yaml")
    candidate = spec.candidate_from_source(BUILDS.replace("# kforge", "# kforge") + "# a distinct candidate\n")
    scratch = tmp_path / "scratch"
    with EvalPool("cpu", devices=[Device("cuda", "4", "fake")], compile_ahead=True, scratch=scratch) as pool:
        done = pool.submit(spec, candidate, SETTINGS, [3, 4]).result(timeout=120)
    assert done.result.verdict == "pass", done.result.reason
    assert done.prepare == "built" and done.prepare_s is not None
    digest = candidate.digest
    log = (scratch / "extensions" / digest / "builds.log").read_text().splitlines()
    # Built once, ahead, with no GPU visible; the evaluation on device 4 imported it without rebuilding.
    assert log == ["built with CUDA_VISIBLE_DEVICES=''"]
    base_digest = spec.baseline.digest
    assert (scratch / "extensions" / base_digest / "builds.log").read_text().splitlines() == \
        ["built with CUDA_VISIBLE_DEVICES=''"]



# A real torch C++ extension (load_inline: ninja and the C++ compiler), as a CUDA C++ candidate is built, that
# refuses to run in the slot (CUDA_VISIBLE_DEVICES=4) if it had to build there: ninja rebuilds a build it finds
# under another path than the one it was made in, so only a build made ahead at the slot's own path is reused.
LOAD_INLINE = '''"""x * 2 through a C++ torch extension."""
import os
from pathlib import Path

from torch.utils.cpp_extension import load_inline


def _object_stamp():
    built = Path(os.environ["TORCH_EXTENSIONS_DIR"]) / "kforge_twice" / "main.o"
    return built.stat().st_mtime_ns if built.exists() else None


_before = _object_stamp()
_ext = load_inline(name="kforge_twice", cpp_sources="torch::Tensor twice(torch::Tensor x) { return x * 2; }",
                   functions=["twice"], verbose=False)
if os.environ.get("CUDA_VISIBLE_DEVICES") == "4" and _object_stamp() != _before:
    raise ImportError("built in the slot: the build made ahead was not used")


def double(x):
    return _ext.twice(x)
'''


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("ninja") and shutil.which("c++")), reason="needs ninja and a C++ compiler")
def test_a_real_load_inline_build_made_ahead_is_loaded_in_the_slot_without_rebuilding(tmp_path: Path) -> None:
    spec = spec_in(tmp_path)
    candidate = spec.candidate_from_source(LOAD_INLINE)
    scratch = tmp_path / "scratch"
    settings = replace(SETTINGS, timeout_s=300)  # a cold C++ build of torch/extension.h on a busy CI core
    with EvalPool("cpu", devices=[Device("cuda", "4", "fake")], compile_ahead=True, scratch=scratch) as pool:
        done = pool.submit(spec, candidate, settings, [3, 4]).result(timeout=900)
    assert done.prepare == "built", done.prepare
    assert done.result.verdict == "pass", done.result.reason
    digest = candidate.digest
    assert (scratch / "extensions" / digest / "kforge_twice" / "kforge_twice.so").is_file()


def test_only_sources_that_build_a_torch_extension_need_building() -> None:
    assert needs_build("from torch.utils.cpp_extension import load_inline\nmod = load_inline(...)\n")
    assert needs_build("import torch.utils.cpp_extension as ext\next.load('k', ['k.cu'])\n")
    assert not needs_build("import torch\n\ndef double(x):\n    return x * 2.0\n")


# Attacks on compile-ahead's builds (found by a red-team pass). Each kernel or candidate says in its docstring
# that it builds "like load_inline", so the pool prepares it ahead; the harmful part runs only in a prepare
# child (no device visible there).
REFERENCE_BUILDS = BUILDS.replace("def double(x):\n    return x * _twice(1.0)\n\n\n", "").replace(
    "def reference(x):\n    return x + x\n", "def reference(x):\n    return x * _twice(1.0)\n")
PLANTS_THE_REFERENCE = '''"""x * 2; when prepared ahead (built like load_inline), it plants a wrong build for the reference's source."""
import os
import subprocess
from pathlib import Path

if os.environ.get("CUDA_VISIBLE_DEVICES") == "" and os.environ.get("KFORGE_EXTENSIONS_PRIVATE"):
    folder = Path(os.environ["KFORGE_EXTENSIONS_PRIVATE"]) / "%(digest)s"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.c").write_text("double twice(double v) { return v * 3; }")
    subprocess.run(["cc", "-shared", "-fPIC", str(folder / "k.c"), "-o", str(folder / "k.so")], check=True)


def double(x):
    return x * 2.0
'''


@pytest.mark.slow
def test_the_kernel_as_written_cannot_plant_the_references_build(tmp_path: Path) -> None:
    (tmp_path / "ref.py").write_text(REFERENCE_BUILDS)
    (tmp_path / "kforge.yaml").write_text(MANIFEST.replace("double.py:reference", "ref.py:reference")
                                          .replace("double.py:make_inputs", "ref.py:make_inputs"))
    (tmp_path / "double.py").write_text(KERNEL)
    digest = load_spec(tmp_path / "kforge.yaml").reference.digest
    (tmp_path / "double.py").write_text(PLANTS_THE_REFERENCE % {"digest": digest})
    spec = load_spec(tmp_path / "kforge.yaml")
    honest = spec.candidate_from_source("import torch\n\n\ndef double(x):\n    return x * 2.0\n")
    with EvalPool("cpu", devices=[Device("cuda", "4", "fake")], compile_ahead=True, scratch=tmp_path / "s") as pool:
        done = pool.submit(spec, honest, SETTINGS, [3, 4]).result(timeout=300)
        published = (tmp_path / "s" / "extensions" / digest / "k.c").read_text()
    # The reference's build is the reference's own: an honest candidate is judged against x * 2.
    assert published == "double twice(double v) { return v * 2; }"
    assert done.result.verdict == "pass", done.result.reason


MOVES_A_FOLDER = '''"""x * 2; when prepared ahead (built like load_inline), it points its build folder at another folder."""
import os
from pathlib import Path

if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
    own = Path.cwd() / ".home" / "extensions"
    own.rename(own.with_name("elsewhere"))
    own.symlink_to("%(victim)s")


def double(x):
    return x * 2.0
'''


@pytest.mark.slow
def test_a_prepared_candidate_cannot_make_the_bot_move_a_folder_outside_its_scratch(tmp_path: Path) -> None:
    spec = spec_in(tmp_path)
    victim = tmp_path / "victim"
    candidate = spec.candidate_from_source(MOVES_A_FOLDER % {"victim": victim})
    digest = candidate.digest
    (victim / digest).mkdir(parents=True)
    (victim / digest / "precious.txt").write_text("the bot must not move this")
    scratch = tmp_path / "scratch"
    with EvalPool("cpu", devices=[Device("cuda", "4", "fake")], compile_ahead=True, scratch=scratch) as pool:
        done = pool.submit(spec, candidate, SETTINGS, [3, 4]).result(timeout=300)
        assert not (scratch / "extensions" / digest).exists()
    assert done.prepare == "built", done.prepare
    assert (victim / digest / "precious.txt").read_text() == "the bot must not move this"
