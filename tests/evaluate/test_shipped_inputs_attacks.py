"""Red team (issue 38's shipped inputs): what a head's code can do to the parent's copy of a recorded file into its
scratch (evaluate.shipping.Stager) and to the file its harness then loads. Real CPU workers, sandboxed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fakes.kb_linear import LINEAR_PROBLEM

from kforge_bot.evaluate import isolation
from kforge_bot.evaluate.api import evaluate, ships_inputs
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import Implementation, load_spec

SETTINGS = EvalSettings(seeds=2, timing_budget_s=0.3, profile=False)
needs_sandbox = pytest.mark.skipif(not isolation.probe().available, reason="needs bubblewrap")

BASE_PROBLEM = LINEAR_PROBLEM

HONEST = """\
class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return F.relu(F.linear(x, self.linear.weight, self.linear.bias))
"""


def _evaluate(tmp_path: Path, prelude: str, body: str = HONEST, extra_files: dict[str, str] | None = None,
              base_problem: str = BASE_PROBLEM):
    base, head = tmp_path / "base", tmp_path / "head"
    base.mkdir()
    head.mkdir()
    (base / "problem.py").write_text(base_problem)
    for name, text in (extra_files or {}).items():
        (head / name).write_text(text)
    source = ("import os\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
              + textwrap.dedent(prelude) + "\n\n" + body)
    (head / "problem.py").write_text(source)
    spec = load_spec(base / "problem.py")
    candidate = Implementation(source, "ModelNew", "problem.py", str(head))
    assert ships_inputs(spec, candidate)
    return evaluate(spec, candidate, "cpu", SETTINGS)


@needs_sandbox
@pytest.mark.slow
def test_the_parents_copy_never_writes_through_a_link_the_head_planted(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"  # any file of the bot's user: ~/.bashrc, the cache, the signing key's file
    victim.write_text("precious")
    prelude = f"""\
        for _name in ('init-listed', 'state-listed', 'forward'):
            os.symlink({str(victim)!r}, os.path.join(os.getcwd(), 'shipped-' + _name + '.pt'))
        """
    _evaluate(tmp_path, prelude)
    assert victim.read_bytes() == b"precious"


@needs_sandbox
@pytest.mark.slow
def test_a_folder_in_place_of_a_shipped_file_is_removed_not_the_parents_crash(tmp_path: Path) -> None:
    prelude = """\
        os.mkdir(os.path.join(os.getcwd(), 'shipped-init-listed.pt'))
        """
    result = _evaluate(tmp_path, prelude)  # raised from the parent's reading thread before
    # What stood in the way is removed, not written through: the honest head gets its weights and is judged.
    assert result.verdict in ("pass", "inconclusive"), result.reason


@needs_sandbox
@pytest.mark.slow
def test_a_head_cannot_hand_its_harness_its_own_copy_of_a_recorded_file(tmp_path: Path) -> None:
    # The head inherits a copy of the reference's forward (rejected when the recorded fingerprint is read:
    # test_shipped_inputs). Its link names a path under the host's /tmp: there the parent writes the recorded file;
    # in the sandbox /tmp is the head's own folder, where it wrote a fingerprint of its choosing.
    fake = tmp_path / "sink" / "forward.pt"
    fake.parent.mkdir()
    prelude = f"""\
        os.makedirs({str(fake.parent)!r}, exist_ok=True)
        torch.save('not the reference', {str(fake)!r})
        os.symlink({str(fake)!r}, os.path.join(os.getcwd(), 'shipped-forward.pt'))
        from copied import Model
        """
    result = _evaluate(tmp_path, prelude, "class ModelNew(Model):\n    pass\n", {"copied.py": BASE_PROBLEM})
    assert result.verdict == "rejected" and "inherits the baseline's forward" in result.reason, result.reason


@pytest.mark.slow
def test_an_honest_head_is_not_failed_by_base_values_the_shipped_file_cannot_carry(tmp_path: Path) -> None:
    # Not shipped (the head's worker imports the base's file, as before issue 38) this head passes: `Linear` takes
    # a numpy integer. Shipped, the recorded file holds one, and torch.load(weights_only=True) refuses it in the
    # head's harness; the failure is charged to the head. (A callable or an object in the inputs, which torch.save
    # cannot write, leaves no file at all: NotShipped, charged to the head too.)
    base = BASE_PROBLEM.replace("import torch\n", "import numpy as np\nimport torch\n", 1)
    base = base.replace("return [dim]", "return [np.int64(dim)]")
    result = _evaluate(tmp_path, "", base_problem=base)
    assert result.verdict in ("pass", "inconclusive"), result.reason


@needs_sandbox
@pytest.mark.slow
def test_the_heads_code_cannot_write_its_inbox(tmp_path: Path) -> None:
    # The inbox (where the parent hands over each recorded file) is read-only to the sandbox: a head that could write
    # it could swap a file between the parent's link and its harness's read. This head is wrong wherever it can.
    prelude = """\
        try:
            with open(os.path.join(os.getcwd(), 'inbox', 'forward.pt'), 'wb') as _f:
                _f.write(b'mine')
            WRONG = 1.0
        except OSError:
            WRONG = 0.0
        """
    body = HONEST.replace("return F.relu(", "return WRONG + F.relu(")
    result = _evaluate(tmp_path, prelude, body)
    assert result.verdict in ("pass", "inconclusive"), result.reason
