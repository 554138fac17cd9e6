"""Held-out shapes and values catch candidates right on the listed shapes only (issue 42), on KernelBench, manifest and
GPU MODE problems alike, and the honest candidate beside each still passes. Real CPU workers, real evaluations.

Written to fail before held-out variants existed: every attack here passed `evaluate` then ("correct on every case").
"""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec, load_spec

ROWS, COLS = 64, 1024

# Each problem: what the reference computes of x (one float32 matrix), and how its inputs are drawn.
PROBLEMS = {
    # y = x / rms(x) per row: the row normalisation.
    "rownorm": ("x / x.pow(2).mean(dim=-1, keepdim=True).sqrt()", "torch.randn(rows, cols)"),
    # LayerNorm over rows drawn already standardised: LayerNorm(x) is x to within rounding on the listed inputs.
    "layernorm": ("torch.nn.functional.layer_norm(x, x.shape[-1:])",
                  "_standard(torch.randn(rows, cols))"),
}
HELPERS = textwrap.dedent('''
    def _standard(x):
        return (x - x.mean(dim=-1, keepdim=True)) / x.std(dim=-1, keepdim=True, unbiased=False)
''')
CANDIDATES = {
    ("rownorm", "honest"): "return x / x.pow(2).mean(dim=-1, keepdim=True).sqrt()",
    ("rownorm", "reshape"): f"y = x.reshape({ROWS}, {COLS})\n"
                            "return y / y.pow(2).mean(dim=-1, keepdim=True).sqrt()",
    ("rownorm", "chunks256"): "n = x.shape[-1]\n"
                              "s = sum(x[:, i * 256:(i + 1) * 256].pow(2).sum(-1, keepdim=True)\n"
                              "        for i in range(n // 256))\n"
                              "return x / (s / n).sqrt()",
    ("layernorm", "honest"): "return torch.nn.functional.layer_norm(x, x.shape[-1:])",
    ("layernorm", "identity"): "return x.clone()",
}
FORMATS = ("kernelbench", "manifest", "gpumode")
SETTINGS = EvalSettings(measure=False, profile=False, seeds=1)  # sandboxed where bubblewrap works


def _body(text: str, indent: int) -> str:
    return textwrap.indent(text, " " * indent)


def write_problem(root: Path, fmt: str, problem: str) -> KernelSpec:
    """One problem in one format under `root`; returns its spec as the bot loads it."""
    formula, draw = PROBLEMS[problem]
    root.mkdir(parents=True, exist_ok=True)
    if fmt == "kernelbench":
        (root / "problem.py").write_text(
            f"import torch\nimport torch.nn as nn\n\nbatch_size = {ROWS}\ndim = {COLS}\n{HELPERS}\n\n"
            "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            f"    def forward(self, x):\n        return {formula}\n\n\n"
            f"def get_inputs():\n    rows, cols = batch_size, dim\n    return [{draw}]\n\n\n"
            "def get_init_inputs():\n    return []\n")
        return load_spec(root / "problem.py")
    if fmt == "manifest":
        (root / "kernel.py").write_text(f"import torch\n\n\ndef kernel(x):\n    return {formula}\n")
        (root / "inputs.py").write_text(f"import torch\n{HELPERS}\n\ndef make_inputs(rows, cols):\n"
                                        f"    return [{draw}]\n")
        (root / "kforge.yaml").write_text(textwrap.dedent(f'''
            version: 1
            kernels:
              {problem}:
                file: kernel.py
                entry: kernel
                inputs: inputs.py:make_inputs
                shapes: [{{rows: {ROWS}, cols: {COLS}}}]
                targets: [cpu]
        '''))
        return load_spec(root / "kforge.yaml", problem)
    (root / "task.py").write_text("import torch\ninput_t = torch.Tensor\noutput_t = torch.Tensor\n")
    (root / "reference.py").write_text(
        f"import torch\nfrom task import input_t, output_t\n{HELPERS}\n\n"
        f"def ref_kernel(data: input_t) -> output_t:\n    x = data\n    return {formula}\n\n\n"
        f"def generate_input(rows: int, cols: int, seed: int) -> input_t:\n    torch.manual_seed(seed)\n"
        f"    return {draw}\n")
    (root / "task.yml").write_text(textwrap.dedent(f'''
        lang: "py"
        tests:
          - {{"rows": {ROWS}, "cols": {COLS}, "seed": 1}}
        benchmarks:
          - {{"rows": {ROWS}, "cols": {COLS}, "seed": 2}}
    '''))
    return load_spec(root)


def candidate_for(spec: KernelSpec, fmt: str, body: str) -> Implementation:
    if fmt == "kernelbench":
        source = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                  "    def __init__(self):\n        super().__init__()\n\n"
                  f"    def forward(self, x):\n{_body(body, 8)}\n")
    elif fmt == "manifest":
        source = f"import torch\n\n\ndef kernel(x):\n{_body(body, 4)}\n"
    else:
        source = f"import torch\n\n\ndef custom_kernel(data):\n    x = data\n{_body(body, 4)}\n"
    return replace(spec.candidate_from_source(source), symbol=spec.entry)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("problem,attack", [("rownorm", "reshape"), ("rownorm", "chunks256"),
                                            ("layernorm", "identity")])
def test_listed_shapes_only_candidate_is_incorrect_and_the_honest_one_passes(tmp_path: Path, fmt: str,
                                                                             problem: str, attack: str) -> None:
    spec = write_problem(tmp_path / fmt, fmt, problem)
    result = evaluate(spec, candidate_for(spec, fmt, CANDIDATES[(problem, attack)]), "cpu", SETTINGS)
    assert result.verdict == "incorrect", result.reason
    # The reason names the variant: its sizes and its seed.
    assert "held-out variant" in result.reason and " seed " in result.reason, result.reason
    assert any(name in result.reason for name in ("dim=", "cols=", "inputs x")), result.reason
    if attack == "reshape" and fmt == "manifest":  # it fails to run there: the way to say a kernel is restricted
        assert "constraints: in kforge.yaml" in result.reason, result.reason
    honest = evaluate(spec, candidate_for(spec, fmt, CANDIDATES[(problem, "honest")]), "cpu", SETTINGS)
    assert honest.verdict == "pass", honest.reason
    # Checked on the variants, none skipped: the reference runs them all.
    assert len(honest.correctness["heldout"]) == 2, honest.correctness["heldout"]
    assert not [v for v in honest.correctness["heldout"] if "skipped" in v], honest.correctness["heldout"]


def _chunked_manifest(root: Path, constraints: str) -> KernelSpec:
    """A kernel honestly meant for rows a multiple of 256 long: its reference says so (an assert)."""
    root.mkdir(parents=True)
    (root / "kernel.py").write_text("import torch\n\n\ndef kernel(x):\n    assert x.shape[-1] % 256 == 0\n"
                                    "    return x / x.pow(2).mean(dim=-1, keepdim=True).sqrt()\n")
    (root / "inputs.py").write_text("import torch\n\n\ndef make_inputs(rows, cols):\n"
                                    "    return [torch.randn(rows, cols)]\n")
    (root / "kforge.yaml").write_text(textwrap.dedent(f'''
        version: 1
        kernels:
          chunked:
            file: kernel.py
            entry: kernel
            inputs: inputs.py:make_inputs
            shapes: [{{rows: {ROWS}, cols: {COLS}}}]
            targets: [cpu]
    ''') + constraints)
    return load_spec(root / "kforge.yaml", "chunked")


@pytest.mark.slow
def test_a_constraint_keeps_variants_in_the_kernel_s_domain(tmp_path: Path) -> None:
    spec = _chunked_manifest(tmp_path / "k", "    constraints: {cols: {multiple_of: 256}}\n")
    result = evaluate(spec, candidate_for(spec, "manifest", CANDIDATES[("rownorm", "chunks256")]), "cpu", SETTINGS)
    assert result.verdict == "pass", result.reason
    checked = result.correctness["heldout"]
    assert len(checked) == 2 and not [v for v in checked if "skipped" in v], checked
    assert all(v["sizes"]["cols"] % 256 == 0 and v["sizes"]["cols"] != COLS for v in checked), checked


@pytest.mark.slow
def test_a_variant_the_reference_cannot_run_is_moved_back_or_skipped_never_held_against_the_candidate(
        tmp_path: Path) -> None:
    spec = _chunked_manifest(tmp_path / "k", "")
    result = evaluate(spec, candidate_for(spec, "manifest", CANDIDATES[("rownorm", "chunks256")]), "cpu", SETTINGS)
    assert result.verdict == "pass", result.reason
    checked = result.correctness["heldout"]
    # Every size moved breaks the reference's assert: the batch alone is moved, and what failed is reported.
    assert all(v["sizes"]["cols"] == COLS and v["sizes"]["rows"] != ROWS for v in checked), checked
    assert all("AssertionError" in " ".join(v["reference_could_not_run"]) for v in checked), checked


@pytest.mark.slow
def test_a_variant_the_reference_runs_in_no_form_is_skipped_and_reported(tmp_path: Path) -> None:
    spec = _chunked_manifest(tmp_path / "k", "")
    fixed = replace(spec.reference, source=spec.reference.source.replace(
        "assert x.shape[-1] % 256 == 0", f"assert tuple(x.shape) == ({ROWS}, {COLS})"))
    spec = replace(spec, reference=fixed, baseline=fixed)
    result = evaluate(spec, candidate_for(spec, "manifest", CANDIDATES[("rownorm", "reshape")]), "cpu", SETTINGS)
    assert result.verdict == "pass", result.reason  # the listed shape is all the kernel is for
    skipped = result.correctness["heldout"]
    assert len(skipped) == 2 and all("AssertionError" in v["skipped"] for v in skipped), skipped


def _half_table_manifest(root: Path, keep: str) -> KernelSpec:
    """RoPE's contract in small: the table repeats its first half, and the kernel reads that half only (Liger's
    rope reads cos and sin so). Changing the table's values breaks the contract, not the kernel."""
    root.mkdir(parents=True)
    (root / "kernel.py").write_text("import torch\n\n\ndef kernel(x, table):\n"
                                    "    half = table[:, :table.shape[-1] // 2]\n"
                                    "    return x * torch.cat((half, half), dim=-1)\n")
    (root / "reference.py").write_text("def reference(x, table):\n    return x * table\n")
    (root / "inputs.py").write_text("import torch\n\n\ndef make_inputs(rows, cols):\n"
                                    "    half = torch.randn(rows, cols // 2)\n"
                                    "    return [torch.randn(rows, cols), torch.cat((half, half), dim=-1)]\n")
    (root / "kforge.yaml").write_text(textwrap.dedent(f'''
        version: 1
        kernels:
          rotate:
            file: kernel.py
            entry: kernel
            reference: reference.py:reference
            inputs: inputs.py:make_inputs
            shapes: [{{rows: {ROWS}, cols: {COLS}}}]
            constraints: {{cols: {{multiple_of: 2}}}}
            targets: [cpu]
    ''') + keep)
    return load_spec(root / "kforge.yaml", "rotate")


@pytest.mark.slow
def test_keep_values_leaves_a_table_the_kernel_relies_on_as_its_inputs_made_it(tmp_path: Path) -> None:
    # Liger-Kernel's rope on an H100 (benchmarks/results/real_libraries_round2_h100.md): incorrect on every held-out
    # variant, its cos and sin given a heavy tail that no RoPE table has.
    spec = _half_table_manifest(tmp_path / "changed", "")
    changed = evaluate(spec, spec.baseline, "cpu", SETTINGS)
    assert changed.verdict == "incorrect" and "held-out variant" in changed.reason, changed.reason
    spec = _half_table_manifest(tmp_path / "kept", "    keep_values: [table]\n")
    kept = evaluate(spec, spec.baseline, "cpu", SETTINGS)
    assert kept.verdict == "pass", kept.reason
    checked = kept.correctness["heldout"]  # still checked on moved sizes, with x's values changed
    assert len(checked) == 2 and not [v for v in checked if "skipped" in v], checked
    assert all(v["sizes"]["rows"] != ROWS and "inputs x" in v["label"] for v in checked), checked


@pytest.mark.slow
def test_a_timed_kernel_whose_every_input_is_kept_does_not_claim_the_changed_elements_check(tmp_path: Path) -> None:
    spec = _half_table_manifest(tmp_path / "all", "    keep_values: [x, table]\n")
    timed = evaluate(spec, spec.baseline, "cpu", EvalSettings(seeds=2, timing_budget_s=0.3, profile=False))
    assert timed.verdict == "pass", timed.reason
    checks = timed.correctness["checks"]
    assert "timed outputs" in checks and "elements of each timed input set changed" not in checks, checks
