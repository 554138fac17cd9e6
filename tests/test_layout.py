"""What may import what (README, "How the code is laid out"): read from the code's own imports, every one of
them, at the top of a module or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kforge_bot"

# part -> (modules it is made of, imports it must never make)
BOT = ("kforge_bot.bot",)
OPTIMIZE = ("kforge_bot.optimize",)
RULES = {
    "evaluate": (("kforge_bot.evaluate",),
                 ("kforge_bot.agents", "kforge_bot.commands", "kforge_bot.gate", "kforge_bot.gitops", "kforge_bot.scale",
                  *BOT, *OPTIMIZE)),
    "agents": (("kforge_bot.agents",), ("git", "github", "kforge_bot.gitops", "kforge_bot.commands", *BOT)),
    "optimize": (OPTIMIZE, ("kforge_bot.commands", "github", *BOT)),
    # init's reading of a library: text and ast only, nothing that runs code or talks to a service.
    "libscan": (("kforge_bot.libscan",), ("kforge_bot.evaluate", "kforge_bot.agents", "kforge_bot.commands",
                                          "kforge_bot.optimize", "kforge_bot.scale", "torch", "triton", "git",
                                          "github", *BOT)),
    # One way: the loop asks its proposers and writes what they report; they never reach back into it.
    "proposers": (("kforge_bot.optimize.proposer", "kforge_bot.optimize.tuner_proposer",
                   "kforge_bot.optimize.llm_proposer"),
                  ("kforge_bot.optimize.loop", "kforge_bot.optimize.run", "kforge_bot.optimize.trajectory")),
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _module(path: Path) -> str:
    return ".".join(("kforge_bot", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_no_part_imports_what_it_must_not() -> None:
    broken = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        for part, (members, forbidden) in RULES.items():
            if not any(_within(module, m) for m in members):
                continue
            for name in sorted(_imports(path)):
                bad = next((f for f in forbidden if _within(name, f)), None)
                if bad:
                    broken.append(f"{module} ({part}) imports {name}")
    assert not broken, "\n".join(broken)


def test_the_rules_see_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("def f():\n    from kforge_bot.bot.prbot import outcome_for\n")
    assert "kforge_bot.bot.prbot" in _imports(sample)  # inside a function too


def test_git_runs_only_in_gitops() -> None:
    """GitPython and the git binary are reached from kforge_bot.gitops alone (its hardening: no hooks, no
    fsmonitor, no filters from the checkout, is then the only way in)."""
    outside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if _module(path) == "kforge_bot.gitops":
            continue
        text = path.read_text()
        if any(_within(name, "git") for name in _imports(path)) or '["git"' in text or "['git'" in text:
            outside.append(_module(path))
    assert not outside, outside
