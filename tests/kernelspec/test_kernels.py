"""A checkout's managed kernels: manifest entries (also below the root) and KernelBench files, limited to the
policy's kernel_paths; a kernel that does not load is kept with its error, a manifest that does not load at
all raises in strict mode and is noted otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.gate_repos import KB, PLAIN, REF, manifest
from fakes.gitrepos import write

from kforge_bot.config.policy import load_policy, parse_policy
from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import load_spec
from kforge_bot.kernelspec.kernels import discover, sibling_references

DEFAULT = load_policy(None)
REPO = Path(__file__).resolve().parents[2]


def _repo(root: Path) -> Path:
    write(root, "ref.py", REF)
    write(root, "a.py", PLAIN)
    write(root, "kforge.yaml", manifest(["a"]))
    write(root, "sub/ref.py", REF)
    write(root, "sub/b.py", PLAIN)
    write(root, "sub/kforge.yaml", manifest(["b"]))
    write(root, "kb/relu.py", KB)
    write(root, "node_modules/kb/relu.py", KB)  # never searched
    return root


def test_manifest_entries_and_kernelbench_files_are_found_with_their_sources(tmp_path: Path) -> None:
    found = discover(_repo(tmp_path), DEFAULT)
    assert sorted(found) == ["a", "kb/relu.py", "sub/b"]
    a, b, kb = found["a"], found["sub/b"], found["kb/relu.py"]
    assert (a.format, a.file, a.manifest, a.error) == ("manifest", "a.py", "kforge.yaml", None)
    assert a.sources == ("a.py", "ref.py") and a.spec is not None and a.spec.name == "a"
    assert (b.file, b.manifest, b.sources) == ("sub/b.py", "sub/kforge.yaml", ("sub/b.py", "sub/ref.py"))
    assert (kb.format, kb.file, kb.sources) == ("kernelbench", "kb/relu.py", ("kb/relu.py",))


def test_the_policys_kernel_paths_limit_what_is_managed(tmp_path: Path) -> None:
    policy = parse_policy({"kernel_paths": ["sub/**"]}, "p.yml")
    assert sorted(discover(_repo(tmp_path), policy)) == ["sub/b"]


def test_kernels_kept_by_id_stay_managed_wherever_their_file_is(tmp_path: Path) -> None:
    """The gate keeps the base's kernels in the head's discovery: a file moved out of kernel_paths stays gated."""
    policy = parse_policy({"kernel_paths": ["sub/**"]}, "p.yml")
    assert sorted(discover(_repo(tmp_path), policy, keep={"a"})) == ["a", "sub/b"]


def test_a_kernel_that_does_not_load_is_kept_with_its_error(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    write(root, "kforge.yaml", manifest(["a"]) + "  broken:\n    file: missing.py\n    entry: kernel\n")
    found = discover(root, DEFAULT)
    assert found["a"].error is None
    assert found["broken"].spec is None and found["broken"].error and found["broken"].file == "missing.py"


def test_a_manifest_that_does_not_load_raises_when_strict_and_is_noted_otherwise(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    write(root, "kforge.yaml", "version: 1\nkernels: [not, a, mapping]\n")
    with pytest.raises(KforgeError):
        discover(root, DEFAULT, strict=True)
    notes: list[str] = []
    found = discover(root, DEFAULT, strict=False, notes=notes)
    assert "a" not in found and "sub/b" in found
    assert notes and "kforge.yaml does not load at this revision" in notes[0]


def test_discovery_reads_nothing_outside_the_checkout_and_no_unsafe_name(tmp_path: Path) -> None:
    """Issue 28, classes 5 and 9: a KernelBench file or a kforge.yaml that is a symbolic link out of the checkout is
    never read; a file whose path could carry a workflow command or Markdown is skipped with a note."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "problem.py").write_text(KB)
    repo = tmp_path / "repo"
    (repo / "kb").mkdir(parents=True)
    (repo / "kb" / "linked.py").symlink_to(outside / "problem.py")
    (repo / "kb" / "ok.py").write_text(KB)
    (repo / "kb" / "x\n::error::y.py").write_text(KB)
    notes: list[str] = []
    found = discover(repo, DEFAULT, notes=notes)
    assert sorted(found) == ["kb/ok.py"]
    assert notes == ["skipped 'kb/x\\n::error::y.py': a kernel file's path may use letters, digits and ._-/ only"]
    (outside / "kforge.yaml").write_text("version: 1\nkernels: {}\n")
    (repo / "kforge.yaml").symlink_to(outside / "kforge.yaml")
    with pytest.raises(KforgeError, match="a manifest must be a file inside the checkout"):
        discover(repo, DEFAULT)


def test_kernels_checked_against_the_same_reference_on_other_targets_are_cross_platform_references(
        kernel_dir: Path) -> None:
    (kernel_dir / "tiny_mm_gpu.py").write_text("def mm_bias_relu(a, w, bias):\n    return a  # a GPU version\n")
    (kernel_dir / "tiny_mm_cpu2.py").write_text("def mm_bias_relu(a, w, bias):\n    return a  # another CPU one\n")
    manifest = kernel_dir / "kforge.yaml"
    manifest.write_text(manifest.read_text() + """
  tiny_mm_gpu:
    file: tiny_mm_gpu.py
    entry: mm_bias_relu
    reference: tiny_mm.py:reference
    inputs: tiny_mm.py:make_inputs
    targets: [cuda]
    language: triton
  tiny_mm_cpu2:
    file: tiny_mm_cpu2.py
    entry: mm_bias_relu
    reference: tiny_mm.py:reference
    inputs: tiny_mm.py:make_inputs
    targets: [cpu]
    language: c
""")
    spec = load_spec(manifest, "tiny_mm")
    refs = sibling_references(spec, manifest, "cpu")
    assert [r["file"] for r in refs] == ["tiny_mm_gpu.py"]  # the other CPU kernel is no other target's
    assert refs[0]["target"] == "cuda" and refs[0]["language"] == "triton" and "a GPU version" in refs[0]["source"]
    # Found from the kernel file too (the manifest above it); on cuda the CPU kernel is the other target's.
    assert [r["file"] for r in sibling_references(spec, kernel_dir / "tiny_mm.py", "cuda")] == ["tiny_mm_cpu2.py"]
    assert sibling_references(load_spec(REPO / "examples" / "kernelbench" / "softmax_problem.py"),
                              REPO / "examples" / "kernelbench" / "softmax_problem.py", "cpu") == []


def test_a_manifest_over_the_kernel_cap_is_an_error_even_where_others_are_noted(tmp_path: Path) -> None:
    """A 263-kernel manifest made `list` say "no managed kernels" and exit 0: the cap turned into an empty
    repository. It is now an error that names the cap, strict or not."""
    root = _repo(tmp_path)
    write(root, "kforge.yaml", manifest([f"k{i}" for i in range(257)]))
    for strict in (True, False):
        with pytest.raises(KforgeError, match="257 kernels, over the cap of 256 in one manifest"):
            discover(root, DEFAULT, strict=strict)
