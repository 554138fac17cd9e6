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
from kforge_bot.evaluate.result import EvalSettings
from kforge_bot.spec import Implementation, KernelSpec, load_spec

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
                              "s = sum(x[:, i * 256:(i + 1) * 256].pow(2).sum(-1, keepdim=True) for i in range(n // 256))\n"
                              "return x / (s / n).sqrt()",
    ("layernorm", "honest"): "return torch.nn.functional.layer_norm(x, x.shape[-1:])",
    ("layernorm", "identity"): "return x.clone()",
}
FORMATS = ("kernelbench", "manifest", "gpumode")
SETTINGS = EvalSettings(measure=False, profile=False, seeds=1, isolation="off")


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
    honest = evaluate(spec, candidate_for(spec, fmt, CANDIDATES[(problem, "honest")]), "cpu", SETTINGS)
    assert honest.verdict == "pass", honest.reason
    # Checked on the variants, none skipped: the reference runs them all.
    assert len(honest.correctness["heldout"]) == 2, honest.correctness["heldout"]
    assert not [v for v in honest.correctness["heldout"] if "skipped" in v], honest.correctness["heldout"]
