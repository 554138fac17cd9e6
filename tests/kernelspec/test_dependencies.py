"""Every file a kernel can read inside its checkout (kforge_bot.kernelspec.dependencies): imports, includes, build
sources and flags, files opened by literal path, and the whole folder where a read cannot be resolved statically."""

from __future__ import annotations

from pathlib import Path

from fakes.gitrepos import write

from kforge_bot.kernelspec.dependencies import local_closure

BUILT = '''
import os
from torch.utils.cpp_extension import load, load_inline

CPP = """
#include "scale.h"
torch::Tensor run(torch::Tensor x) { return x * SCALE; }
"""

def build():
    load_inline(name="k", cpp_sources=[CPP], functions=["run"], extra_include_paths=["include"])
    return load(name="k2", sources=["csrc/k.cpp"], extra_cflags=["-O2", "-Ithird_party"])
'''


def rel(paths: list[Path], root: Path) -> list[str]:
    return sorted(p.relative_to(root.resolve()).as_posix() for p in paths)


def test_includes_build_sources_and_their_include_folders_are_dependencies(tmp_path: Path) -> None:
    write(tmp_path, "kernel.py", BUILT)
    write(tmp_path, "include/scale.h", '#pragma once\n#include "detail/factor.h"\n#define SCALE 2\n')
    write(tmp_path, "include/detail/factor.h", "#define FACTOR 1\n")
    write(tmp_path, "csrc/k.cpp", '#include "local.h"\n#include "tp.h"\n#include <torch/extension.h>\n'
                                  '#include "cuda_fp16.h"\n')
    write(tmp_path, "csrc/local.h", "// beside its includer\n")
    write(tmp_path, "third_party/tp.h", "// found through -Ithird_party\n")
    write(tmp_path, "third_party/unused.h", "// in an include folder, never included\n")
    write(tmp_path, "other/unrelated.h", "")
    assert rel(local_closure([tmp_path / "kernel.py"], [tmp_path], tmp_path), tmp_path) == [
        "csrc/k.cpp", "csrc/local.h", "include/detail/factor.h", "include/scale.h", "kernel.py", "third_party/tp.h"]


def test_files_opened_by_a_literal_path_are_dependencies(tmp_path: Path) -> None:
    write(tmp_path, "kernel.py", 'import os, numpy as np, torch\nfrom pathlib import Path\n'
                                 'HERE = os.path.dirname(__file__)\n'
                                 'W = np.load(os.path.join(HERE, "data/w.npy"))\n'
                                 'T = torch.load(Path(__file__).parent / "t.pt")\n'
                                 'with open("table.bin", "rb") as f:\n    TABLE = f.read()\n'
                                 'S = open(os.path.join(HERE, "cfg", "s.txt")).read()\n'
                                 'open(os.path.join(HERE, "log.txt"), "w").write("a file it writes")\n')
    for name in ("data/w.npy", "t.pt", "table.bin", "data/other.npy", "cfg/s.txt", "cfg/unread.txt"):
        write(tmp_path, name, "x")
    assert rel(local_closure([tmp_path / "kernel.py"], [tmp_path], tmp_path), tmp_path) == [
        "cfg/s.txt", "data/w.npy", "kernel.py", "t.pt", "table.bin"]


def test_a_read_that_cannot_be_resolved_counts_as_the_whole_folder(tmp_path: Path) -> None:
    write(tmp_path, "k/kernel.py", 'import torch\n\ndef weights(name):\n    return torch.load(name)\n')
    write(tmp_path, "k/a.bin", "a")
    write(tmp_path, "k/deeper/b.bin", "b")
    write(tmp_path, "k/.git/config", "hidden")
    write(tmp_path, "elsewhere.bin", "not in the kernel's folder")
    assert rel(local_closure([tmp_path / "k/kernel.py"], [tmp_path / "k"], tmp_path), tmp_path) == [
        "k/a.bin", "k/deeper/b.bin", "k/kernel.py"]
    write(tmp_path, "m/kernel.cu", "#include KERNEL_HEADER\n")  # the preprocessor decides
    write(tmp_path, "m/any.h", "")
    assert rel(local_closure([tmp_path / "m/kernel.cu"], [tmp_path / "m"], tmp_path), tmp_path) == [
        "m/any.h", "m/kernel.cu"]
    write(tmp_path, "n/kernel.py", 'import os\nfrom torch.utils.cpp_extension import load_inline\n'
                                   'load_inline(name="x", cpp_sources=["int f();"], '
                                   'extra_include_paths=[os.path.dirname(__file__)])\n')
    write(tmp_path, "n/h.h", "")
    assert rel(local_closure([tmp_path / "n/kernel.py"], [tmp_path / "n"], tmp_path), tmp_path) == [
        "n/h.h", "n/kernel.py"]


def test_json_and_pickle_reading_an_open_file_add_nothing_more(tmp_path: Path) -> None:
    write(tmp_path, "kernel.py", 'import json\nwith open("cfg.json") as f:\n    CFG = json.load(f)\n')
    write(tmp_path, "cfg.json", "{}")
    write(tmp_path, "other.json", "{}")
    assert rel(local_closure([tmp_path / "kernel.py"], [tmp_path], tmp_path), tmp_path) == ["cfg.json", "kernel.py"]


def test_a_symlink_out_of_the_checkout_is_not_a_dependency(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, "secret.h", "")
    repo = tmp_path / "repo"
    write(repo, "kernel.cu", '#include "link.h"\n')
    (repo / "link.h").symlink_to(outside / "secret.h")
    assert rel(local_closure([repo / "kernel.cu"], [repo], repo), repo) == ["kernel.cu"]


def test_modules_imported_by_name_at_run_time_are_dependencies(tmp_path: Path) -> None:
    write(tmp_path, "k/kernel.py", 'import importlib, runpy\nH = importlib.import_module("lib.helper")\n'
                                   'runpy.run_path("tool.py")\n')
    write(tmp_path, "lib/__init__.py", "")
    write(tmp_path, "lib/helper.py", "SCALE = 2\n")
    write(tmp_path, "k/tool.py", "")
    write(tmp_path, "k/unread.bin", "")
    assert rel(local_closure([tmp_path / "k/kernel.py"], [tmp_path / "k", tmp_path], tmp_path), tmp_path) == [
        "k/kernel.py", "k/tool.py", "lib/__init__.py", "lib/helper.py"]
    write(tmp_path, "m/kernel.py", 'H = __import__("hel" + "per")\n')  # a name made at run time
    write(tmp_path, "m/helper.py", "SCALE = 2\n")
    assert rel(local_closure([tmp_path / "m/kernel.py"], [tmp_path / "m"], tmp_path), tmp_path) == [
        "m/helper.py", "m/kernel.py"]


def test_a_computed_read_that_climbs_out_of_its_folder_counts_the_whole_checkout(tmp_path: Path) -> None:
    write(tmp_path, "k/kernel.py", 'import os\nimport numpy as np\nHERE = os.path.dirname(__file__)\n'
                                   'W = np.fromfile(HERE + "/../data/" + "w" + ".bin")\n')
    write(tmp_path, "data/w.bin", "x")
    write(tmp_path, "n/kernel.py", 'from pathlib import Path\nimport torch\n\n'
                                   'def weights(name):\n    return torch.load(Path(__file__).parent.parent / name)\n')
    assert "data/w.bin" in rel(local_closure([tmp_path / "k/kernel.py"], [tmp_path / "k"], tmp_path), tmp_path)
    assert "data/w.bin" in rel(local_closure([tmp_path / "n/kernel.py"], [tmp_path / "n"], tmp_path), tmp_path)


# ------------------------------------------------------------------------- the three misses of issue 38


def test_a_path_made_at_run_time_and_read_by_its_method_counts_the_whole_folder(tmp_path: Path) -> None:
    """`Path(name).read_text()`: the path is the receiver, made at run time, so the folder counts; with literals
    in it, the file they name."""
    write(tmp_path, "k/kernel.py", 'from pathlib import Path\n\ndef scale(name):\n'
                                   '    return float(Path(__file__).with_name(name).read_text())\n')
    write(tmp_path, "k/scale.txt", "2.0")
    assert rel(local_closure([tmp_path / "k/kernel.py"], [tmp_path / "k"], tmp_path), tmp_path) == [
        "k/kernel.py", "k/scale.txt"]
    write(tmp_path, "m/kernel.py", 'from pathlib import Path\nW = (Path(__file__).parent / "w.bin").read_bytes()\n')
    write(tmp_path, "m/w.bin", "w")
    write(tmp_path, "m/other.bin", "not read")
    assert rel(local_closure([tmp_path / "m/kernel.py"], [tmp_path / "m"], tmp_path), tmp_path) == [
        "m/kernel.py", "m/w.bin"]


def test_a_module_imported_after_the_kernel_edits_sys_path_counts(tmp_path: Path) -> None:
    """`sys.path.insert(0, <its folder>/vendor); import helper`: helper is no module under the import roots, so the
    folder the edit can reach counts (the checkout's, where the edit climbs above the kernel's folder)."""
    write(tmp_path, "k/kernel.py", 'import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '
                                   '"vendor"))\nimport helper\n')
    write(tmp_path, "k/vendor/helper.py", "SCALE = 2\n")
    assert "k/vendor/helper.py" in rel(local_closure([tmp_path / "k/kernel.py"], [tmp_path / "k"], tmp_path),
                                       tmp_path)
    write(tmp_path, "m/kernel.py", 'import sys\nsys.path += ["../shared"]\nimport helper2\n')
    write(tmp_path, "shared/helper2.py", "SCALE = 2\n")
    assert "shared/helper2.py" in rel(local_closure([tmp_path / "m/kernel.py"], [tmp_path / "m"], tmp_path),
                                      tmp_path)


def test_an_angle_include_found_through_an_include_flag_counts(tmp_path: Path) -> None:
    """`#include <tile.h>` with `-Iinclude` (one flag or two) is the checkout's header; `<torch/extension.h>`, found
    in no include folder of the checkout, is the toolkit's."""
    write(tmp_path, "kernel.py", 'from torch.utils.cpp_extension import load\n'
                                 'M = load(name="k", sources=["k.cu"], extra_cuda_cflags=["-O3", "-Iinclude"],\n'
                                 '         extra_cflags=["-isystem", "third"])\n')
    write(tmp_path, "k.cu", "#include <tile.h>\n#include <vendor.h>\n#include <torch/extension.h>\n")
    write(tmp_path, "include/tile.h", "#define TILE 32\n")
    write(tmp_path, "third/vendor.h", "")
    write(tmp_path, "include/unused.h", "")
    assert rel(local_closure([tmp_path / "kernel.py"], [tmp_path], tmp_path), tmp_path) == [
        "include/tile.h", "k.cu", "kernel.py", "third/vendor.h"]
