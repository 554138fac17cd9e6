"""The gate's plan: what a kernel's result depends on (its files, the local files they import, its spec),
and what the gate does with each kernel before measuring anything."""

from __future__ import annotations

from pathlib import Path

from fakes.gate_repos import PLAIN, REF, VIA_HELPER, manifest
from fakes.gitrepos import write

from kforge_bot.cache import TargetFingerprint
from kforge_bot.gate.plan import Planner, ToMeasure, dependencies, material
from kforge_bot.gate.report import KernelReport
from kforge_bot.gate.target_choice import parse_target, required_targets
from kforge_bot.kernels import discover
from kforge_bot.policy import load_policy, parse_policy


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
    return Planner(policy or load_policy(None), parse_target("cpu"), required_targets(load_policy(None)), head, base,
                   changed, all_kernels=False, time_budget_s=None, cache=None, fingerprint=lambda kind: fp,
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
