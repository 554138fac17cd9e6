"""Shipped inputs (issue 38, Plan.ship_inputs): where the reference and the inputs come from the base's checkout, the
head's worker imports none of the base's files; its inputs, constructor arguments and weights are the ones the
reference's worker recorded, handed over one file at a time. Real CPU workers (sandboxed where bubblewrap works)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from fakes.kb_linear import MARKED_LINEAR_PROBLEM

from kforge_bot.evaluate.api import evaluate, ships_inputs
from kforge_bot.evaluate.shipping import Stager
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.wire import heldout
from kforge_bot.evaluate.wire.shipped import LISTED, form_context, init_name, inputs_name, state_name, valid_name
from kforge_bot.kernelspec import Implementation, load_spec

SETTINGS = EvalSettings(seeds=2, timing_budget_s=0.3, profile=False)

# The base's file marks the process it is imported in.
BASE_PROBLEM = MARKED_LINEAR_PROBLEM


def head_problem(extra: str = "") -> str:
    """The head's version of the file: its own kernel, refusing to run where the base's code was loaded."""
    return textwrap.dedent(f"""\
        import os

        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class ModelNew(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.linear = nn.Linear(features, features)

            def forward(self, x):
                if os.environ.get('KFORGE_TEST_BASE_LOADED'):
                    raise RuntimeError("the base's code was loaded in the head's process")
                {extra or 'pass'}
                return F.relu(F.linear(x, self.linear.weight, self.linear.bias))
        """)


def _sides(tmp_path: Path, head_source: str) -> tuple:
    base, head = tmp_path / "base", tmp_path / "head"
    base.mkdir()
    head.mkdir()
    (base / "problem.py").write_text(BASE_PROBLEM)
    (head / "problem.py").write_text(head_source)
    spec = load_spec(base / "problem.py")
    candidate = Implementation(head_source, "ModelNew", "problem.py", str(head))
    return spec, candidate


@pytest.mark.slow
def test_a_head_judged_on_the_bases_kernelbench_file_passes_with_none_of_it_loaded_and_the_variants_rebuilt(
        tmp_path: Path) -> None:
    spec, head = _sides(tmp_path, head_problem())
    assert ships_inputs(spec, head)
    result = evaluate(spec, head, "cpu", SETTINGS)
    assert result.verdict in ("pass", "inconclusive"), result.reason
    assert "inconclusive" != result.verdict or "correct on every case" in result.reason, result.reason
    heldout = result.correctness["heldout"]
    assert len(heldout) == 2 and not [v for v in heldout if "skipped" in v], heldout


@pytest.mark.slow
def test_a_wrong_head_is_still_incorrect_with_shipped_inputs(tmp_path: Path) -> None:
    spec, head = _sides(tmp_path, head_problem("x = x + 1e-2"))
    result = evaluate(spec, head, "cpu", SETTINGS)
    assert result.verdict == "incorrect", result.reason


@pytest.mark.slow
def test_no_input_set_lies_in_the_heads_scratch_when_its_code_runs(tmp_path: Path) -> None:
    # A head that looks for recorded inputs it has not been called with (to answer the timed calls from a table
    # made ahead) finds none: each file is fetched when the harness needs it and deleted once read.
    spec, head = _sides(tmp_path, head_problem(
        "if any(n.startswith('shipped-') for n in os.listdir('.')):\n"
        "                    raise RuntimeError('recorded inputs found: ' + ', '.join(os.listdir('.')))"))
    result = evaluate(spec, head, "cpu", SETTINGS)
    assert result.verdict in ("pass", "inconclusive"), result.reason


@pytest.mark.slow
def test_a_head_that_inherits_a_copy_of_the_references_forward_is_rejected_without_the_reference_in_its_process(
        tmp_path: Path) -> None:
    spec, _ = _sides(tmp_path, head_problem())
    head_dir = tmp_path / "head"
    (head_dir / "copied.py").write_text(BASE_PROBLEM.replace("os.environ['KFORGE_TEST_BASE_LOADED'] = 'here'", ""))
    source = "from copied import Model\n\n\nclass ModelNew(Model):\n    pass\n"
    (head_dir / "problem.py").write_text(source)
    result = evaluate(spec, Implementation(source, "ModelNew", "problem.py", str(head_dir)), "cpu", SETTINGS)
    assert result.verdict == "rejected" and "inherits the baseline's forward" in result.reason, result.reason


def test_inputs_ship_only_where_the_reference_or_the_inputs_come_from_another_checkout(tmp_path: Path) -> None:
    spec, head = _sides(tmp_path, head_problem())
    assert ships_inputs(spec, head)
    # `check` and `optimize`: the candidate in the kernel's own checkout, the reference beside it.
    assert not ships_inputs(spec, Implementation(head.source, "ModelNew", "problem.py", spec.root))
    assert not ships_inputs(spec, Implementation(head.source, "ModelNew", "problem.py", None))


def test_the_parent_hands_over_only_recorded_files_by_their_names(tmp_path: Path) -> None:
    recorded, scratch = tmp_path / "recorded", tmp_path / "scratch"
    recorded.mkdir()
    scratch.mkdir()
    name = inputs_name(7, {"rows": 4})
    (recorded / name).write_bytes(b"data")
    (tmp_path / "secret.pt").write_bytes(b"x")
    stager = Stager(recorded, scratch)
    inbox = scratch / "inbox"
    assert stager.answer({"file": name}) == {"op": "staged", "file": name, "ok": True}
    assert (inbox / name).read_bytes() == b"data"
    # Before each file the inbox is emptied, nothing followed: a link (to the bot's files) goes, a folder too.
    (inbox / "planted.pt").symlink_to(tmp_path / "secret.pt")
    (inbox / "folder").mkdir()
    assert stager.answer({"file": name})["ok"] is True
    assert sorted(p.name for p in inbox.iterdir()) == [name] and (tmp_path / "secret.pt").read_bytes() == b"x"
    # A value the reference could not record as data: said so, for the head's harness to charge the base.
    (recorded / "init-listed.pt.why").write_text("UnpicklingError: numpy.core.multiarray.scalar")
    assert stager.answer({"file": "init-listed.pt"})["unshippable"].startswith("UnpicklingError")
    assert stager.answer({"file": inputs_name(8, {"rows": 4})})["ok"] is False  # never recorded
    for forged in ("../secret.pt", "/etc/passwd", "in-../../x.pt", None, 5, "state-listed.pt/../../secret.pt"):
        assert not valid_name(forged)
        assert stager.answer({"file": forged})["ok"] is False
    assert sorted(p.name for p in inbox.iterdir()) == [name]


def test_each_held_out_form_records_under_names_of_its_own() -> None:
    # A KernelBench file's variant moves module globals, not keywords, and its forms (tried in turn until the
    # reference runs one) share the variant's seed. Named by the seed alone, a form after a failed one recorded its
    # inputs and weights under the failed one's names; on an H100 the head then got the first form's tensors in
    # the second's skeleton (KernelBench L2 1 and 76: "the handed-over tensors do not match").
    forms = heldout.draw([{}], [1, 2, 3], globals_sizes={"batch_size": 128, "in_features": 8192})[0]
    assert len(forms) > 1 and len({f.seed for f in forms}) == 1
    contexts = [form_context(f) for f in forms]
    assert len(set(contexts)) == len(forms) and LISTED not in contexts
    seed = forms[0].seed
    assert len({inputs_name(seed, {}, c) for c in contexts + [LISTED]}) == len(forms) + 1
    # The head's worker names a form as the reference's did: the form crosses to it as data.
    assert [form_context(heldout.Variant.from_dict(f.to_dict())) for f in forms] == contexts
    assert all(valid_name(init_name(c)) and valid_name(state_name(c)) for c in contexts)
