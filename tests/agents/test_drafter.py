"""The --draft prompt and its reply, read as text only (kforge_bot.agents.drafter)."""

from __future__ import annotations

import pytest

from kforge_bot.agents.drafter import build_messages, parse_reply
from kforge_bot.errors import MalformedReply


def test_the_prompt_names_the_launcher_its_kernels_and_the_tests_notes() -> None:
    (message,) = build_messages("op", "lib/ops.py", "def op(x, w):\n    ...", ["@triton.jit\ndef _k(x): ..."],
                                ["x", "w"], True, ["tests/test_ops.py::test_op: uses a fixture"])
    text = message["content"]
    assert "reference(x, w)" in text and "def op(x, w):" in text and "def _k(x)" in text
    assert "it returns several values" in text and "uses a fixture" in text


def test_a_reply_is_parsed_never_run() -> None:
    reply = ("```python\nimport torch\nraise SystemExit('never run here')\n"
             "SHAPES = [{'n': 8}, {'n': 16, 'dtype': 'float16'}]\n"
             "def reference(x):\n    return x\n\ndef make_inputs(n, dtype='float32'):\n    return (torch.randn(n),)\n```")
    draft = parse_reply(reply)
    assert draft.shapes == [{"n": 8}, {"n": 16, "dtype": "float16"}] and "raise SystemExit" in draft.source
    for broken, why in (
            (reply.replace("def make_inputs", "def other"), "make_inputs"),
            (reply.replace("SHAPES = [{'n': 8}", "SHAPES = [{'n': len('ab')}"), "literal"),
            (reply.replace("SHAPES = [{'n': 8}, {'n': 16, 'dtype': 'float16'}]", "SHAPES = []"), "non-empty"),
            (reply.replace("def reference", "def ref"), "reference"),
            ("no code", "fenced")):
        with pytest.raises(MalformedReply, match=why):
            parse_reply(broken)


def test_a_reference_that_imports_the_library_is_refused() -> None:
    body = ("SHAPES = [{'n': 8}]\ndef make_inputs(n):\n    return (torch.randn(n),)\n")
    for cheat in ("from kernels.scale import scale\ndef reference(x):\n    return scale(x)\n",
                  "import kernels\ndef reference(x):\n    return kernels.scale.scale(x)\n",
                  "from .scale import scale\ndef reference(x):\n    return scale(x)\n",
                  "def reference(x):\n    return __import__('kernels').scale(x)\n"):
        with pytest.raises(MalformedReply, match="library itself|__import__"):
            parse_reply(f"```python\nimport torch\n{cheat}{body}```", library_modules=frozenset({"kernels"}))
    assert parse_reply(f"```python\nimport torch\ndef reference(x):\n    return x\n{body}```",
                       library_modules=frozenset({"kernels"})).shapes == [{"n": 8}]
