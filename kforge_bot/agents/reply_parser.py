"""The generator's reply, read: exactly one fenced block of the kernel file's language, checked, or
`MalformedReply` with feedback for the next prompt (kforge_bot.agents.generator writes the prompt)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import PurePath

from kforge_bot.agents.generator import fence_tag, source_format
from kforge_bot.errors import MalformedReply

# The fence tags accepted for each source format.
FENCE_TAGS: dict[str, frozenset[str]] = {
    "python": frozenset({"python", "py", "python3"}),
    "cuda": frozenset({"cuda", "cu", "cpp", "c++", "cxx"}),
    "cpp": frozenset({"cpp", "c++", "cxx", "cc", "hpp"}),
    "c": frozenset({"c", "h"}),
}

_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")


@dataclass(frozen=True)
class _Block:
    tag: str
    text: str
    line: int  # 1-based line of the opening fence
    closed: bool


def _blocks(reply: str) -> list[_Block]:
    blocks: list[_Block] = []
    lines = reply.splitlines()
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        tag = info.split()[0].lower().lstrip("{.").rstrip("}") if info else ""
        body: list[str] = []
        j = i + 1
        closed = False
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                closed = True
                break
            body.append(lines[j])
            j += 1
        blocks.append(_Block(tag, "\n".join(body), i + 1, closed))
        i = j + 1
    return blocks


def extract_source(reply: str, language: str, entry: str | None = None, *, filename: str | None = None, truncated: bool = False) -> str:
    """Exactly one fenced block of the file's language, checked; else MalformedReply with feedback.

    language: the spec's language (used in messages); filename: the kernel file (decides the fence:
    .py -> python, .cu -> cuda, .cpp -> cpp, .c -> c; default python); entry: a symbol the file must
    define; truncated: the reply was cut off (finish_reason "length"), for a precise message."""
    fmt = source_format(filename)
    tags = FENCE_TAGS[fmt]
    want = fence_tag(fmt)
    file_name = PurePath(filename).name if filename else f"the {language} file"
    if not reply or not reply.strip():
        raise MalformedReply(f"the reply was empty; send the complete {file_name} in one ```{want} block")
    blocks = _blocks(reply)
    right = [b for b in blocks if b.tag in tags]
    if not right:
        untagged = [b for b in blocks if not b.tag]
        if len(untagged) == 1:
            right = untagged
    if not right:
        if not blocks:
            cut = " (it was cut off: reply with the code only)" if truncated else ""
            raise MalformedReply(
                f"the reply had no fenced code block{cut}; send the complete {file_name} in exactly one ```{want} block"
            )
        found = ", ".join(sorted({f"```{b.tag or '(untagged)'}" for b in blocks}))
        raise MalformedReply(
            f"the reply had no ```{want} block (found {found}); send the complete {file_name} in exactly one ```{want} block"
        )
    if len(right) > 1:
        lines = ", ".join(str(b.line) for b in right)
        raise MalformedReply(
            f"the reply had {len(right)} ```{want} blocks (at lines {lines}); send the whole {file_name} "
            f"as exactly one block, not pieces or alternatives"
        )
    block = right[0]
    if not block.closed:
        why = "the reply was cut off at the length limit" if truncated else "the block was never closed"
        raise MalformedReply(f"the ```{want} block starting at line {block.line} is incomplete: {why}; send a shorter complete file")
    source = block.text.strip("\n")
    if not source.strip():
        raise MalformedReply(f"the ```{want} block was empty; send the complete {file_name}")
    if fmt == "python":
        _check_python(source, entry, file_name)
    elif entry and not re.search(rf"\b{re.escape(entry)}\s*\(", source):
        raise MalformedReply(f"the code does not define `{entry}`; keep the entry point's name and signature")
    return source + "\n"


def _check_python(source: str, entry: str | None, file_name: str) -> None:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        line = (exc.text or "").rstrip()
        where = f"line {exc.lineno}" + (f": `{line.strip()}`" if line.strip() else "")
        raise MalformedReply(f"the code is not valid Python: {exc.msg} at {where}; fix the syntax") from None
    if not entry:
        return
    top = entry.split(".")[0]
    if top not in _top_level_names(tree):
        raise MalformedReply(
            f"the code does not define `{top}` at module level; {file_name} must keep the entry `{entry}` "
            f"with its name and signature"
        )


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):  # definitions under `if HAS_TRITON:` / try-import
            body = node.body + node.orelse + getattr(node, "finalbody", [])
            for handler in getattr(node, "handlers", []):
                body += handler.body
            names |= _top_level_names(ast.Module(body=body, type_ignores=[]))
    return names
