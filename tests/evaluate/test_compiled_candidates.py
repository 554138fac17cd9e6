"""torch.compile's own marks on inputs and outputs are not a candidate's stashed state (issue 42): an honest
compiled candidate passes on every format, while state stashed under the same names is still refused."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

from kforge_bot.evaluate.wire import checks
from kforge_bot.evaluate.api import evaluate
from tests.evaluate.test_heldout_attacks import FORMATS, SETTINGS, candidate_for, write_problem

COMPILED = ("global _compiled\n"
            "if '_compiled' not in globals():\n"
            "    _compiled = torch.compile(lambda t: t / t.pow(2).mean(dim=-1, keepdim=True).sqrt(),\n"
            "                              mode='reduce-overhead')\n"
            "return _compiled(x)")
# State kept on the input under a name torch.compile uses: the result of the first call, returned again later.
STASH = ("if hasattr(x, '_dynamo_hint_overrides'):\n"
         "    return x._dynamo_hint_overrides[0].clone()\n"
         "y = x / x.pow(2).mean(dim=-1, keepdim=True).sqrt()\n"
         "x._dynamo_hint_overrides = {0: y.clone()}\n"
         "return y")


@pytest.mark.slow
def test_torch_compile_marks_pass_and_stashed_state_under_their_names_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # This test compiles in the suite's own process: its compiler caches are the test's. Some of inductor's caches
    # ignore TORCHINDUCTOR_CACHE_DIR and always use <temporary folder>/torchinductor_<user>, which the whole suite
    # found left behind after this test: the temporary folder is the test's own too.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    compiled = torch.compile(lambda t: t * 2 + 1, mode="reduce-overhead")
    seen = []
    for rows in (8, 9, 11):  # a new size makes dynamo mark the inputs' dimensions dynamic, and the outputs'
        x = torch.randn(rows, 16)
        seen.append((x, compiled(x)))
    x, out = seen[-1]
    marked = [n for t in (x, out) for n in checks._own_attributes(t)]
    assert any(n.startswith("_dynamo_") for n in marked), f"torch {torch.__version__} marked nothing: {marked}"
    checks.check_inputs_plain([x])
    checks.check_plain_outputs([out], "cpu")
    for name, value in [("_dynamo_weak_dynamic_indices", {0, 5}),  # no dimension 5
                        ("_dynamo_weak_dynamic_indices", [torch.ones(1)]),
                        ("_dynamo_hint_overrides", {0: torch.ones(1)}),
                        ("_dynamo_static_input_type", lambda: None),
                        ("_dynamo_cache", {})]:
        y = torch.randn(4, 4)
        setattr(y, name, value)
        with pytest.raises(checks.CheckFailure, match="attributes of its own"):
            checks.check_inputs_plain([y])
        with pytest.raises(checks.CheckFailure, match="attributes of its own"):
            checks.check_plain_outputs([y], "cpu")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_stash_under_torch_compile_s_names_is_rejected(tmp_path: Path, fmt: str) -> None:
    spec = write_problem(tmp_path / fmt, fmt, "rownorm")
    result = evaluate(spec, candidate_for(spec, fmt, STASH), "cpu", SETTINGS)
    assert result.verdict == "rejected" and "_dynamo_hint_overrides" in result.reason, result.reason


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_reduce_overhead_compiled_candidate_passes_on_held_out_shapes(tmp_path: Path, fmt: str) -> None:
    spec = write_problem(tmp_path / fmt, fmt, "rownorm")
    result = evaluate(spec, candidate_for(spec, fmt, COMPILED), "cpu", SETTINGS)
    assert result.verdict == "pass", result.reason
