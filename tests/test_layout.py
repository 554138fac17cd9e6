"""What may import what (README, "How the code is laid out"): read from the code's own imports, every one of
them, at the top of a module or inside a function."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kforge_bot"

# part -> (modules it is made of, imports it must never make)
BOT = ("kforge_bot.prbot",)
OPTIMIZE = ("kforge_bot.optimize",)
# Everything above the leaves: what runs, measures, searches or talks to a service.
HARNESS = ("kforge_bot.evaluate", "kforge_bot.scaleout", "kforge_bot.optimize", "kforge_bot.agents", "kforge_bot.prbot",
           "kforge_bot.commands", "kforge_bot.gate", "kforge_bot.counters", "kforge_bot.tuner", "kforge_bot.init",
           "kforge_bot.check")
# The loop and the parts around it (a candidate's way to its record, the starting point, acceptance, profiling).
LOOP = ("kforge_bot.optimize.loop", "kforge_bot.optimize.candidates", "kforge_bot.optimize.starting_point",
        "kforge_bot.optimize.acceptance", "kforge_bot.optimize.profiling")
RULES = {
    # The judge: nothing above it, and not the hardware counters either (they run beside it, never in a verdict).
    "evaluate": (("kforge_bot.evaluate",),
                 ("kforge_bot.agents", "kforge_bot.commands", "kforge_bot.gate", "kforge_bot.gitops",
                  "kforge_bot.scaleout", "kforge_bot.counters", "kforge_bot.tuner", *BOT, *OPTIMIZE)),
    # The counters profile beside the judge: its sandbox and settings, nothing of the loop or the bot.
    "counters": (("kforge_bot.counters",),
                 ("kforge_bot.agents", "kforge_bot.commands", "kforge_bot.gate", "kforge_bot.gitops",
                  "kforge_bot.scaleout", "kforge_bot.tuner", *BOT, *OPTIMIZE)),
    # The tuner: a search over a kernel's own parameters, with no model and nothing of the loop.
    "tuner": (("kforge_bot.tuner",), ("kforge_bot.agents", "kforge_bot.commands", "kforge_bot.gate", "kforge_bot.gitops",
                                      "kforge_bot.scaleout", "openai", "git", "github", *BOT, *OPTIMIZE)),
    # The leaves: read by every part, so they import none of them.
    "leaves": (("kforge_bot.config", "kforge_bot.errors", "kforge_bot.text", "kforge_bot.cache",
                "kforge_bot.environment", "kforge_bot.kernelspec", "kforge_bot.machine"), HARNESS),
    "agents": (("kforge_bot.agents",), ("git", "github", "kforge_bot.gitops", "kforge_bot.commands", *BOT)),
    "optimize": (OPTIMIZE, ("kforge_bot.commands", "github", *BOT)),
    # init's reading of a library: text and ast only, nothing that runs code or talks to a service.
    "init.scan": (("kforge_bot.init.scan",), ("kforge_bot.evaluate", "kforge_bot.agents", "kforge_bot.commands",
                                            "kforge_bot.optimize", "kforge_bot.scaleout", "torch", "triton", "git",
                                            "github", *BOT)),
    # Workloads measure beside the judge, with its sandbox and statistics: nothing of the loop, the bot or the CLI.
    "workloads": (("kforge_bot.workloads",), ("kforge_bot.agents", "kforge_bot.commands", "kforge_bot.scaleout",
                                              "kforge_bot.tuner", "openai", "github", *BOT, *OPTIMIZE)),
    # The gate and the PR bot both stand on github/: the gate never reaches into the bot, GitHub's room into neither.
    "gate": (("kforge_bot.gate",), (*BOT, "kforge_bot.commands")),
    "github": (("kforge_bot.github",), ("kforge_bot.gate", "kforge_bot.commands", *BOT)),
    # One way: the loop asks its proposers and writes what they report; they never reach back into it.
    "proposers": (("kforge_bot.optimize.protocols", "kforge_bot.optimize.tuner_proposer",
                   "kforge_bot.optimize.llm_proposer"),
                  (*LOOP, "kforge_bot.optimize.run", "kforge_bot.optimize.trajectory")),
    # The loop knows its partners by their protocols (kforge_bot.optimize.protocols) alone: which proposer and
    # which evaluator a run has is kforge_bot.optimize.run's choice.
    "loop": (LOOP, ("kforge_bot.optimize.tuner_proposer", "kforge_bot.optimize.llm_proposer",
                    "kforge_bot.optimize.evaluator", "kforge_bot.agents.llm", "kforge_bot.tuner",
                    "kforge_bot.scaleout")),
}


def _parse(path: Path) -> ast.Module:
    return _parsed(path.read_text(), str(path))


@functools.lru_cache(maxsize=None)
def _parsed(text: str, filename: str) -> ast.Module:
    # Each rule walks every module: parsed once for all of them (keyed on the text, so an edit is parsed again).
    return ast.parse(text, filename)


def _imports(path: Path) -> set[str]:
    return _imported_names(ast.walk(_parse(path)))


def _imported_names(nodes: Iterable[ast.AST]) -> set[str]:
    found: set[str] = set()
    for node in nodes:
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


def _forbidden(module: str, imports: set[str]) -> list[str]:
    """The imports of `module` that a rule of its part forbids, each as 'module (part) imports name'."""
    broken = []
    for part, (members, forbidden) in RULES.items():
        if any(_within(module, m) for m in members):
            broken += [f"{module} ({part}) imports {name}" for name in sorted(imports)
                       if any(_within(name, f) for f in forbidden)]
    return broken


def test_no_part_imports_what_it_must_not() -> None:
    broken = [line for path in sorted(PACKAGE.rglob("*.py")) for line in _forbidden(_module(path), _imports(path))]
    assert not broken, "\n".join(broken)


def test_the_rules_see_the_gate_or_github_reach_up() -> None:
    """The gate never imports the PR bot; github/, below both, imports neither."""
    assert _forbidden("kforge_bot.gate.render", {"kforge_bot.prbot.evidence", "kforge_bot.github.client"}) == \
        ["kforge_bot.gate.render (gate) imports kforge_bot.prbot.evidence"]
    assert _forbidden("kforge_bot.github.client", {"kforge_bot.gate.report", "kforge_bot.prbot.pull_request"}) == \
        ["kforge_bot.github.client (github) imports kforge_bot.gate.report",
         "kforge_bot.github.client (github) imports kforge_bot.prbot.pull_request"]
    assert not _forbidden("kforge_bot.prbot.pull_request", {"kforge_bot.gate.report", "kforge_bot.github.client"})


def test_the_rules_see_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("def f():\n    from kforge_bot.prbot.pull_request import outcome_for\n")
    assert "kforge_bot.prbot.pull_request" in _imports(sample)  # inside a function too


# The wall in evaluate (kforge_bot/evaluate/__init__.py): what only the sandboxed worker loads, what both load (the
# wire), and the bot's side: evaluate's top and every other room.
WORKER_SIDE = "kforge_bot.evaluate.worker"
WIRE = "kforge_bot.evaluate.wire"
# Programs of other rooms that run in the sandbox as the evaluation's worker does: held to the worker's rule.
SANDBOXED = ("kforge_bot.workloads.worker", "kforge_bot.counters.profiled_worker")
# The bot's rooms above the leaves, besides evaluate's own top: nothing in the sandbox has business there.
BOT_ROOMS = tuple(room for room in HARNESS if room != "kforge_bot.evaluate") + (
    "kforge_bot.workloads", "kforge_bot.history", "kforge_bot.doctor", "kforge_bot.github", "kforge_bot.gitops",
    "kforge_bot.libscan")


def _side(module: str) -> str:
    if _within(module, WORKER_SIDE) or module in SANDBOXED:
        return "worker"
    return "wire" if _within(module, WIRE) else "bot"


def _bot_side(name: str) -> bool:
    """A name on the bot's side of the wall: evaluate's top (its package too: `from kforge_bot.evaluate import
    EvalResult`), or any other room above the leaves."""
    if _within(name, WORKER_SIDE) or _within(name, WIRE) or name in SANDBOXED:
        return False
    return _within(name, "kforge_bot.evaluate") or any(_within(name, room) for room in BOT_ROOMS)


def _crosses(side: str, name: str) -> bool:
    if side == "bot":  # the bot never loads what runs beside untrusted code
        return _within(name, WORKER_SIDE)
    if side == "worker":  # the worker: itself, the wire, the leaves
        return _bot_side(name)
    return _within(name, WORKER_SIDE) or _bot_side(name)  # the wire: neither side


def _wall_breaches(module: str, imported: set[str]) -> list[str]:
    side = _side(module)
    return [f"{module} ({side} side) imports {name}" for name in sorted(imported) if _crosses(side, name)]


def test_nothing_imports_across_the_wall_in_evaluate() -> None:
    """The bot's side never imports evaluate.worker, the worker's side never imports the bot's, and the wire
    imports neither: anywhere in a module, inside a function too."""
    broken = [line for path in sorted(PACKAGE.rglob("*.py")) for line in _wall_breaches(_module(path), _imports(path))]
    assert not broken, "\n".join(broken)


def test_the_wall_rules_see_a_crossing(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("from kforge_bot.evaluate.wire import checks\n\ndef f():\n"
                      "    from kforge_bot.evaluate.worker.loading import import_implementation\n"
                      "    from kforge_bot.evaluate import sandbox, EvalResult\n"
                      "    import kforge_bot.scaleout.pool\n")
    imported = _imports(sample)
    assert _wall_breaches("kforge_bot.evaluate.judge", imported) == [
        "kforge_bot.evaluate.judge (bot side) imports kforge_bot.evaluate.worker.loading",
        "kforge_bot.evaluate.judge (bot side) imports kforge_bot.evaluate.worker.loading.import_implementation"]
    assert _wall_breaches("kforge_bot.gate.measure", imported)  # every room of the bot, not only evaluate's top
    assert [line.rpartition(" ")[2] for line in _wall_breaches("kforge_bot.evaluate.worker.calls", imported)] == [
        "kforge_bot.evaluate", "kforge_bot.evaluate.EvalResult", "kforge_bot.evaluate.sandbox",
        "kforge_bot.scaleout.pool"]
    assert _wall_breaches("kforge_bot.workloads.worker", imported) == [
        line.replace("kforge_bot.evaluate.worker.calls", "kforge_bot.workloads.worker")
        for line in _wall_breaches("kforge_bot.evaluate.worker.calls", imported)]
    assert [line.rpartition(" ")[2] for line in _wall_breaches("kforge_bot.evaluate.wire.plan", imported)] == [
        "kforge_bot.evaluate", "kforge_bot.evaluate.EvalResult", "kforge_bot.evaluate.sandbox",
        "kforge_bot.evaluate.worker.loading", "kforge_bot.evaluate.worker.loading.import_implementation",
        "kforge_bot.scaleout.pool"]
    wire_only = tmp_path / "y.py"
    wire_only.write_text("from kforge_bot.evaluate.wire.result import EvalResult\n"
                         "from kforge_bot.kernelspec import KernelSpec\n")
    assert not any(_wall_breaches(m, _imports(wire_only)) for m in ("kforge_bot.evaluate.api",
                                                                     "kforge_bot.evaluate.worker.entry",
                                                                     "kforge_bot.evaluate.wire.timing"))


def _top_imports(path: Path) -> set[str]:
    """The imports a module makes as it loads: those outside its functions."""
    tree = _parse(path)
    deferred = {id(node) for function in ast.walk(tree) if isinstance(function, (ast.FunctionDef,
                                                                                    ast.AsyncFunctionDef))
                for node in ast.walk(function)}
    return _imported_names(node for node in ast.walk(tree) if id(node) not in deferred)


def test_the_packages_a_worker_loads_first_import_only_the_wire_as_they_load() -> None:
    """Every module of the worker's side loads kforge_bot and kforge_bot.evaluate first (evaluate's top is the bot's
    side): what they import as they load runs in the worker, so nothing of the bot's side."""
    broken = [f"{_module(path)} imports {name} as it loads"
              for path in (PACKAGE / "__init__.py", PACKAGE / "evaluate" / "__init__.py", PACKAGE / "evaluate" /
                           "worker" / "__init__.py", PACKAGE / "evaluate" / "wire" / "__init__.py")
              for name in sorted(_top_imports(path)) if _crosses("worker", name)]
    assert not broken, "\n".join(broken)


def test_the_load_time_rule_sees_an_import_at_the_top(tmp_path: Path) -> None:
    sample = tmp_path / "__init__.py"
    sample.write_text("from kforge_bot.evaluate.wire.result import EvalResult\nfrom kforge_bot.evaluate.api import x\n"
                      "\ndef __getattr__(name):\n    from kforge_bot.evaluate.references import ReferenceStore\n")
    assert _top_imports(sample) == {"kforge_bot.evaluate.wire.result", "kforge_bot.evaluate.wire.result.EvalResult",
                                    "kforge_bot.evaluate.api", "kforge_bot.evaluate.api.x"}
    assert [n for n in sorted(_top_imports(sample)) if _crosses("worker", n)] == ["kforge_bot.evaluate.api",
                                                                                 "kforge_bot.evaluate.api.x"]


def _private_uses(path: Path) -> list[str]:
    """Where a module reaches another module's private name: `from kforge_bot.x import _name`, or `m._name` on a
    module `m` of the package that it imported (`import kforge_bot.x as m`, `from kforge_bot import x`)."""
    tree = _parse(path)
    modules: set[str] = set()  # local names bound to modules of the package
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.asname and _within(a.name, "kforge_bot"))
        elif isinstance(node, ast.ImportFrom) and node.module and _within(node.module, "kforge_bot"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                if _is_module(f"{node.module}.{alias.name}"):
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def _is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:])
    return (PACKAGE / relative).with_suffix(".py").is_file() or (PACKAGE / relative / "__init__.py").is_file()


def test_no_module_uses_another_module_s_private_names() -> None:
    """A leading underscore means "only this module": another one that needs the name gets a public one."""
    broken = [f"{_module(path)} {use}" for path in sorted(PACKAGE.rglob("*.py")) for use in _private_uses(path)]
    assert not broken, "\n".join(broken)


def test_the_rule_sees_a_private_use(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("from kforge_bot import gitops\nfrom kforge_bot.kernelspec import _read\n\n"
                      "def f(repo):\n    return gitops._run(repo, 'status', what='x')\n")
    assert _private_uses(sample) == ["line 2: from kforge_bot.kernelspec import _read", "line 5: gitops._run"]


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


def test_the_package_s_top_holds_few_flat_modules() -> None:
    """Work belongs in a room by job (evaluate/, kernelspec/, config/, ...); the top keeps the entry points and
    leaves."""
    flat = sorted(p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(flat) <= 8, flat


def test_no_two_test_modules_share_a_name() -> None:
    """pytest imports test files by their base name (the test folders are not packages): two of one name stop the
    whole suite at collection."""
    tests = Path(__file__).parent
    seen: dict[str, list[str]] = {}
    for path in tests.rglob("test_*.py"):
        if "data" not in path.relative_to(tests).parts[0]:
            seen.setdefault(path.name, []).append(str(path.relative_to(tests)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}


def _import_graph(package: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports, anywhere in it (at the top, under TYPE_CHECKING, inside a
    function: an import deferred into a function still ties the two modules together). `from a.b import c` names
    the module a.b.c where there is one, else a.b. Left out: a package loading one of its own submodules inside a
    function, as `targets.target_class` does; a submodule always loads its package first, so that pair is one
    room's business, not a circle between rooms."""
    modules = {".".join(("kforge_bot", *p.relative_to(package).with_suffix("").parts)).removesuffix(".__init__"): p
               for p in package.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = _parse(path)
        deferred = {id(node) for function in ast.walk(tree) if isinstance(function, (ast.FunctionDef,
                                                                                        ast.AsyncFunctionDef))
                    for node in ast.walk(function)}
        edges = graph.setdefault(module, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                target = resolve(name)
                own_child = path.name == "__init__.py" and _within(target or "", module) and id(node) in deferred
                if target and target != module and not own_child:
                    edges.add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other through imports (strongly connected, more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_modules_import_each_other_in_a_circle() -> None:
    """A circle (a -> b -> ... -> a) means neither module can be read, tested or moved without the other."""
    assert not _cycles(_import_graph(PACKAGE)), "\n".join(" <-> ".join(c) for c in _cycles(_import_graph(PACKAGE)))


def test_the_circle_rule_sees_a_circle_through_a_function(tmp_path: Path) -> None:
    package = tmp_path / "kforge_bot"
    (package / "room").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "store.py").write_text("from kforge_bot.room import helper\n")
    (package / "room" / "__init__.py").write_text("def load():\n    from kforge_bot.room import child\n")
    (package / "room" / "child.py").write_text("from kforge_bot.room import load\n")  # one room: no circle
    (package / "room" / "helper.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                "    from kforge_bot.facts import x\n")
    (package / "facts.py").write_text("def f():\n    from kforge_bot.store import y\n")
    assert _cycles(_import_graph(package)) == [["kforge_bot.facts", "kforge_bot.room.helper", "kforge_bot.store"]]


def _actions_variables(path: Path) -> list[str]:
    """The GitHub Actions variables (GITHUB_*) a module names as a whole string: what it reads from the
    environment."""
    return sorted({node.value for node in ast.walk(_parse(path))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str)
                   and node.value.startswith("GITHUB_") and node.value[7:].replace("_", "").isalnum()
                   and node.value.isupper()})


def test_the_actions_environment_is_read_in_one_module() -> None:
    """kforge_bot.github.actions reads what GitHub Actions sets for a step; every other module asks it."""
    elsewhere = {_module(path): found for path in sorted(PACKAGE.rglob("*.py"))
                 if _module(path) != "kforge_bot.github.actions" and (found := _actions_variables(path))}
    assert not elsewhere, elsewhere


def test_the_actions_rule_sees_a_variable(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text('import os\nrun = os.environ.get("GITHUB_RUN_ID")\nhint = "set GITHUB_TOKEN"\n')
    assert _actions_variables(sample) == ["GITHUB_RUN_ID"]


def _exits(path: Path) -> list[str]:
    """Where a module ends the process itself: sys.exit(...), exit(...) or raise SystemExit."""
    found = []
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.exit", "exit", "quit"):
            found.append((node.lineno, ast.unparse(node.func)))
        elif isinstance(node, ast.Raise) and node.exc is not None and "SystemExit" in ast.unparse(node.exc):
            found.append((node.lineno, "raise SystemExit"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_commands_return_their_exit_code() -> None:
    """A command returns 0, 1 or 2 (kforge_bot.cli ends the process with it, once); none exits on its own."""
    broken = [f"{_module(path)} {where}" for path in sorted((PACKAGE / "commands").rglob("*.py"))
              for where in _exits(path)]
    assert not broken, "\n".join(broken)


def test_the_exit_rule_sees_an_exit(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("import sys\n\ndef f(bad):\n    if bad:\n        sys.exit(1)\n    raise SystemExit(0)\n")
    assert _exits(sample) == ["line 5: sys.exit", "line 6: raise SystemExit"]


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 60
SAYS_WHY = "Long because"  # a docstring that opens a paragraph with this may pass the size rule


def _oversized(root: Path) -> list[str]:
    """Modules over MAX_MODULE_LINES and functions over MAX_FUNCTION_LINES under `root` whose docstring does not
    say why (a paragraph starting with SAYS_WHY)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        tree, lines = _parsed(source, str(path)), source.count("\n")
        rel = path.relative_to(root).as_posix()
        if lines > MAX_MODULE_LINES and SAYS_WHY not in (ast.get_docstring(tree) or ""):
            found.append(f"{rel}: {lines} lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES and SAYS_WHY not in (ast.get_docstring(node) or ""):
                    found.append(f"{rel}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_module_over_500_lines_and_no_function_over_60() -> None:
    """Issue 41's size rule: a part a reader can hold in one sitting, or a docstring that says why not."""
    assert _oversized(PACKAGE) == []


def test_the_size_rule_sees_a_long_module_and_a_long_function(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(61))
    (tmp_path / "long_function.py").write_text(f"def f():\n{body}")
    (tmp_path / "long_module.py").write_text("x = 1\n" * 501)
    (tmp_path / "excused.py").write_text(f'def g():\n    """{SAYS_WHY} it lists every case."""\n{body}')
    assert _oversized(tmp_path) == ["long_function.py:1 f: 62 lines", "long_module.py: 501 lines"]
