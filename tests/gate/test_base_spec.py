"""The head's kernel under the base's test, and what of its test a change edits (kforge_bot/gate/base_spec.py)."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

from fakes.gate_repos import KB, PLAIN, REF, manifest
from fakes.gitrepos import write

from kforge_bot.gate.base_spec import HEAD_FIELDS, judged_spec, spec_changes
from kforge_bot.kernelspec import has_own_reference, kernel_implementation, load_kernelbench, load_manifest


def _specs(tmp: Path, base: dict[str, str], head: dict[str, str]):
    for side, files in (("base", base), ("head", head)):
        for rel, text in files.items():
            write(tmp / side, rel, text)
    return load_manifest(tmp / "base" / "kforge.yaml")["k"], load_manifest(tmp / "head" / "kforge.yaml")["k"]


FILES = {"ref.py": REF, "k.py": PLAIN, "kforge.yaml": manifest(["k"])}


def test_the_head_keeps_its_code_and_takes_the_bases_test(tmp_path: Path) -> None:
    wrong = PLAIN.replace("+ y", "- y")
    base, head = _specs(tmp_path, FILES, {**FILES, "k.py": wrong, "ref.py": REF.replace("+ y", "- y"),
                                          "kforge.yaml": manifest(["k"], n=16)})
    judged = judged_spec(head, base)
    assert kernel_implementation(judged) == kernel_implementation(head) and wrong in judged.baseline.source
    assert judged.reference == base.reference and judged.reference.root == str(tmp_path / "base")
    assert judged.inputs_source == base.inputs_source and judged.shape_sets == ({"n": 128},)
    assert spec_changes(base, head) == ["reference", "inputs", "shapes"]  # ref.py holds both


def test_editing_only_the_kernel_changes_no_test_even_beside_its_reference(tmp_path: Path) -> None:
    """A kernel file that holds its reference and inputs too: a change to the kernel's code alone is no change to
    its test; a change to the reference's definition is."""
    own = PLAIN + "\n\n" + REF.replace("import torch\n\n\n", "")
    files = {"k.py": own, "kforge.yaml": manifest(["k"]).replace("ref.py", "k.py")}
    base, head = _specs(tmp_path / "a", files, {**files, "k.py": own.replace("x * 2.0 + y\n", "y + x * 2.0\n", 1)})
    assert spec_changes(base, head) == []
    edited = own.replace("def reference(x, y):\n    return x * 2.0 + y", "def reference(x, y):\n    return x")
    base, head = _specs(tmp_path / "b", files, {**files, "k.py": edited})
    assert spec_changes(base, head) == ["reference"]


def test_tolerance_seeds_and_init_are_parts_of_the_test(tmp_path: Path) -> None:
    base, head = _specs(tmp_path, FILES, FILES)
    assert spec_changes(base, replace(head, tolerance={"atol": 1.0, "rtol": 1.0}, seeds=1, init_kwargs={"a": 1})) == [
        "init", "tolerance", "seeds"]
    dodging = replace(head, targets=("cuda",))  # a change cannot leave the device the gate runs on
    assert spec_changes(base, dodging) == ["targets"] and judged_spec(dodging, base).targets == ("cpu",)


def test_a_kernel_that_is_its_own_reference_is_held_to_its_base_version(tmp_path: Path) -> None:
    files = {"ref.py": REF, "k.py": PLAIN, "kforge.yaml": manifest(["k"]).replace("    reference: ref.py:reference\n", "")}
    base, head = _specs(tmp_path, files, {**files, "k.py": PLAIN.replace("+ y", "- y")})
    assert not has_own_reference(head) and spec_changes(base, head) == []
    judged = judged_spec(head, base)
    assert judged.reference == kernel_implementation(base)  # the oracle is the base version
    assert "- y" in kernel_implementation(judged).source


def test_a_kernelbench_head_keeps_its_model_new_under_the_bases_model(tmp_path: Path) -> None:
    with_new = KB + "\n\nclass ModelNew(Model):\n    pass\n"
    write(tmp_path / "base", "p.py", KB)
    write(tmp_path / "head", "p.py", with_new.replace("torch.randn(64, 64)", "torch.randn(8, 8)"))
    base, head = load_kernelbench(tmp_path / "base" / "p.py"), load_kernelbench(tmp_path / "head" / "p.py")
    judged = judged_spec(head, base)
    assert kernel_implementation(judged).symbol == "ModelNew" and "ModelNew" in kernel_implementation(judged).source
    assert judged.reference.source == KB and judged.inputs_source.source == KB
    assert spec_changes(base, head) == ["reference", "inputs"]  # ModelNew appears: Model is now a reference


def test_every_field_but_the_kernels_code_is_the_bases_and_a_head_edit_of_it_is_named(tmp_path: Path) -> None:
    """The manifest's newer keys (kwargs, tolerance.backward, env, constraints) were the head's when judged_spec
    listed the base's fields one by one: a head could pin its sizes (`constraints: fixed`) to dodge the held-out
    shapes, loosen its gradients' tolerance or change its own keyword arguments. Every field outside HEAD_FIELDS is
    the base's, and a head that edits one of these is spec-changed."""
    base, head = _specs(tmp_path, FILES, FILES)
    edits = {"call_kwargs": ({"alpha": 2.0}, "kwargs"), "backward_tolerance": ({"atol": 1.0, "rtol": 1.0}, "tolerance"),
             "env": ({"LIB_MODE": "fast"}, "env"), "constraints": ({"n": {"fixed": True}}, "constraints"),
             "grad_inplace": ((0,), "backward")}  # a head declaring its backward writes into its inputs
    for name, (value, part) in edits.items():
        edited = replace(head, **{name: value})
        assert getattr(judged_spec(edited, base), name) == getattr(base, name), name
        assert spec_changes(base, edited) == [part], name
    theirs = {f.name for f in fields(head)} - set(HEAD_FIELDS)
    judged = judged_spec(head, base)
    assert all(getattr(judged, name) == getattr(base, name) for name in theirs)
    assert all(getattr(judged, name) == getattr(head, name) for name in HEAD_FIELDS)
