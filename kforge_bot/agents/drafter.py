"""`kforge-bot init --draft`: the prompt that asks an LLM for a kernel's missing reference and inputs, and the
reply read back as text.

The reply is untrusted: it is parsed with `ast` and its `SHAPES` read with `ast.literal_eval`; nothing in it
runs here. The command runs it in a sandboxed worker against the kernel before proposing it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from string import Template
from typing import Any

from kforge_bot.agents.generator import load_prompt
from kforge_bot.agents.reply_parser import extract_source
from kforge_bot.errors import MalformedReply

REFERENCE = "reference"
INPUTS = "make_inputs"
_SOURCE_LIMIT = 12_000  # characters of kernel source shown; a long file is cut in the middle


@dataclass(frozen=True)
class Draft:
    """A drafted oracle module: its source text and the shape sets it lists."""

    source: str
    shapes: list[dict[str, Any]]


def build_messages(entry: str, file: str, launcher_source: str, kernel_sources: list[str], parameters: list[str],
                   returns_several: bool, notes: list[str]) -> list[dict[str, str]]:
    kernels = "\n\n".join(kernel_sources)
    if len(kernels) > _SOURCE_LIMIT:
        half = _SOURCE_LIMIT // 2
        kernels = f"{kernels[:half]}\n# ... ({len(kernels) - _SOURCE_LIMIT} characters left out) ...\n{kernels[-half:]}"
    text = Template(load_prompt("drafter.md")).safe_substitute(
        entry=entry, file=file, launcher=launcher_source, kernels=kernels, parameters=", ".join(parameters),
        returns_note=(" (it returns several values: return the same tuple, the kernel's outputs computed and the "
                      "rest as it has them)" if returns_several else ""),
        notes="".join(f"\nFrom the library's tests: {n}" for n in notes))
    return [{"role": "user", "content": text}]


def parse_reply(reply: str, *, truncated: bool = False, library_modules: frozenset[str] = frozenset()) -> Draft:
    """The drafted module, checked as text: it defines `reference`, `make_inputs` and a literal `SHAPES`, and
    imports nothing of the library (`library_modules`: its top-level module names), nor anything by a
    computed name: a reference that called the kernel would agree with it whatever it computes."""
    source = extract_source(reply, "torch", REFERENCE, filename="draft.py", truncated=truncated)
    tree = ast.parse(source)
    for node in ast.walk(tree):
        imported = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else \
            ["(relative)"] if isinstance(node, ast.ImportFrom) else []
        own = [m for m in imported if m == "(relative)" or m.split(".")[0] in library_modules]
        if own:
            raise MalformedReply(f"the module imports the library itself ({own[0]}); write the reference in plain "
                                 "PyTorch")
        if isinstance(node, ast.Name) and node.id in ("__import__", "importlib", "exec", "eval"):
            raise MalformedReply(f"the module uses {node.id}; import what it needs by name, and no library code")
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if INPUTS not in names:
        raise MalformedReply(f"the module does not define `{INPUTS}(**shape)`; define it at module level")
    shapes_node = next((n.value for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
                        and isinstance(n.targets[0], ast.Name) and n.targets[0].id == "SHAPES"), None)
    if shapes_node is None:
        raise MalformedReply("the module does not define `SHAPES`, a literal list of keyword-argument dicts")
    try:
        shapes = ast.literal_eval(shapes_node)
    except (ValueError, SyntaxError, TypeError):
        raise MalformedReply("`SHAPES` must be a literal list of dicts of numbers and strings") from None
    if not (isinstance(shapes, list) and shapes and all(isinstance(s, dict) and all(isinstance(k, str) for k in s)
                                                         for s in shapes)):
        raise MalformedReply("`SHAPES` must be a non-empty list of dicts with string keys")
    return Draft(source, shapes[:4])
