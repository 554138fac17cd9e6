"""The gate's plan: what a kernel's result depends on (its files, the local files they import, its spec),
and what the gate does with each kernel before measuring anything."""

from __future__ import annotations

from pathlib import Path

from fakes.gate_repos import PLAIN, REF, VIA_HELPER, manifest
from fakes.gitrepos import write

from kforge_bot.targets.fingerprint import TargetFingerprint
from kforge_bot.config.policy import load_policy, parse_policy
from kforge_bot.gate.plan import Planner, ToMeasure, dependencies, material
from kforge_bot.gate.report import KernelReport
from kforge_bot.gate.required_targets import required_targets
from kforge_bot.kernelspec.kernels import discover
from kforge_bot.targets import choose_target


def _checkout(root: Path, helper: str = "def scale(x):\n    return x * 2.0\n") -> Path:
    write(root, "ref.py", REF)
    write(root, "helper.py", helper)
    write(root, "viahelper.py", VIA_HELPER)
    write(root, "plain.py", PLAIN)
    write(root, "kforge.yaml", manifest(["viahelper", "plain"]))
    return root


def test_a_kernel_depends_on_the_local_files_it_imports(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    kernels = discover(root, load_policy(None))
    names = {p.relative_to(root).as_posix() for p in dependencies(kernels["viahelper"], root)}
    assert names == {"viahelper.py", "helper.py", "ref.py"}
    assert "helper.py" not in {p.name for p in dependencies(kernels["plain"], root)}


def test_material_changes_with_an_imported_helper_and_not_with_the_checkouts_place(tmp_path: Path) -> None:
    one = _checkout(tmp_path / "one")
    two = _checkout(tmp_path / "two")
    slower = _checkout(tmp_path / "three", helper="def scale(x):\n    return x + x\n")
    policy = load_policy(None)
    mat = {name: material(discover(root, policy)["viahelper"], root) for name, root in
           (("one", one), ("two", two), ("three", slower))}
    assert mat["one"] == mat["two"]  # free of checkout locations
    assert mat["one"] != mat["three"]
    plain = {name: material(discover(root, policy)["plain"], root) for name, root in (("one", one), ("three", slower))}
    assert plain["one"] == plain["three"]  # the helper is not plain's business


def _planner(base: Path, head: Path, *, changed: set[str], measure: bool = True, policy=None) -> Planner:
    fp = TargetFingerprint("cpu", "test cpu", "torch")
    return Planner(policy or load_policy(None), choose_target("cpu"), required_targets(load_policy(None)), head, base,
                   changed, all_kernels=False, timing_budget_s=None, cache=None, fingerprint=lambda kind: fp,
                   measure=measure, targets={})


def test_the_plan_skips_unchanged_kernels_and_measures_changed_ones(tmp_path: Path) -> None:
    base = _checkout(tmp_path / "base")
    head = _checkout(tmp_path / "head", helper="def scale(x):\n    return x + x\n")
    policy = load_policy(None)
    base_k, head_k = discover(base, policy), discover(head, policy)
    planner = _planner(base, head, changed={"helper.py"})
    assert planner.plan("plain", head_k["plain"], base_k["plain"]) is None  # unchanged
    todo = planner.plan("viahelper", head_k["viahelper"], base_k["viahelper"])
    assert isinstance(todo, ToMeasure)
    assert (todo.kind, todo.device_name, todo.touched) == ("cpu", "test cpu", ["helper.py"])
    assert todo.usable_base is base_k["viahelper"] and todo.key and todo.key_material["kernel"] == "viahelper"
    assert planner.targets == {"cpu": TargetFingerprint("cpu", "test cpu", "torch").to_dict()}

    only_plan = _planner(base, head, changed={"helper.py"}, measure=False)
    planned = only_plan.plan("viahelper", head_k["viahelper"], base_k["viahelper"])
    assert isinstance(planned, KernelReport) and planned.verdict == "skipped" and planned.key == todo.key
    assert planned.reason == "plan only: not in the cache, would be measured"

    skipping = parse_policy({"gate": {"rules": [{"kernel": "viahelper", "skip": True}]}}, "p.yml")
    skipped = _planner(base, head, changed={"helper.py"}, policy=skipping).plan(
        "viahelper", head_k["viahelper"], base_k["viahelper"])
    assert isinstance(skipped, KernelReport) and skipped.verdict == "skipped" and "skipped by the policy" in skipped.reason


# A kernel that builds its C++ with a header from an include folder, and reads a data file by literal path.
BUILT_KERNEL = '''
import torch
from torch.utils.cpp_extension import load
from weights import SCALE

_ext = None


def kernel(x, y):
    global _ext
    _ext = _ext or load(name="k", sources=["csrc/k.cpp"], extra_cflags=["-Iinclude"])
    return _ext.run(x) * SCALE + y
'''
WEIGHTS = '''
import os

with open(os.path.join(os.path.dirname(__file__), "data", "scale.txt")) as handle:
    SCALE = float(handle.read())
'''


def _built_checkout(root: Path, header: str = "#define FACTOR 2\n", scale: str = "1.0",
                    kernel: str = BUILT_KERNEL) -> Path:
    write(root, "ref.py", REF)
    write(root, "built.py", kernel)
    write(root, "weights.py", WEIGHTS)
    write(root, "csrc/k.cpp", '#include <torch/extension.h>\n#include "scale.h"\n'
                              "torch::Tensor run(torch::Tensor x) { return x * FACTOR; }\n")
    write(root, "include/scale.h", header)
    write(root, "data/scale.txt", scale)
    write(root, "kforge.yaml", manifest(["built"]))
    return root


def test_a_change_to_only_a_header_or_a_data_file_is_measured_not_unchanged(tmp_path: Path) -> None:
    """Attack (issue 28, class 3): a PR that changes only what a kernel includes or reads passed as unchanged."""
    policy = load_policy(None)
    base = _built_checkout(tmp_path / "base")
    for name, head in (("include/scale.h", _built_checkout(tmp_path / "header", header="#define FACTOR 3\n")),
                       ("data/scale.txt", _built_checkout(tmp_path / "data", scale="1.5"))):
        todo = _planner(base, head, changed={name}).plan("built", discover(head, policy)["built"],
                                                         discover(base, policy)["built"])
        assert isinstance(todo, ToMeasure), f"a change to {name} alone was planned as unchanged"
        assert todo.touched == [name]


def test_a_header_change_misses_the_cache_entry_of_the_kernel_before_it(tmp_path: Path) -> None:
    from kforge_bot.cache import ResultCache

    policy = load_policy(None)
    base = _built_checkout(tmp_path / "base", kernel=BUILT_KERNEL.replace("* SCALE + y", "* SCALE + y  # base"))
    cache = ResultCache(tmp_path / "cache", secret=b"k" * 32)
    first = _built_checkout(tmp_path / "first")
    planner = _planner(base, first, changed={"built.py"})
    planner.cache = cache
    todo = planner.plan("built", discover(first, policy)["built"], discover(base, policy)["built"])
    assert isinstance(todo, ToMeasure)
    cache.put(todo.key, todo.key_material, KernelReport("built", "built", "built.py", "manifest", "pass",
                                                        "measured once").to_dict())
    header_changed = _built_checkout(tmp_path / "second", header="#define FACTOR 3\n")
    planner = _planner(base, header_changed, changed={"built.py", "include/scale.h"})
    planner.cache = cache
    again = planner.plan("built", discover(header_changed, policy)["built"], discover(base, policy)["built"])
    assert isinstance(again, ToMeasure), "a stale cache entry was served after the header changed"
    assert again.key != todo.key
