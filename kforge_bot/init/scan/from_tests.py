"""What a library's own tests say about a launcher: the PyTorch expression (or reference function) they compare
its result with, the inputs they build for it and the sizes they run it at (`pytest.mark.parametrize`).

A test qualifies when it calls the launcher and passes the result (or a name bound to it) to a comparison
(`torch.testing.assert_close`, `torch.allclose`, any `assert_*close`/`*allclose`/`assert_*equal`) beside
another expression. That expression becomes a reference function whose parameters are the launcher's arguments;
the statements that build those arguments become an inputs function whose parameters are the test's
parametrized sizes. Everything it proposes is text, for a person to review: nothing here runs it.
"""

from __future__ import annotations

import ast
import builtins
import copy
import itertools
import operator
import re
import sys
from dataclasses import dataclass, field

from kforge_bot.init.scan.launchers import Launcher, is_test_file
from kforge_bot.init.scan.modules import Library, Module

_COMPARE = re.compile(r"allclose|assert\w*close|assert\w*equal|close\w*assert", re.I)
_COPIES = {"clone", "detach", "requires_grad_", "contiguous", "detach_"}
_DEVICE_WORDS = re.compile(r"device|cuda|xpu", re.I)
_MAX_SHAPES = 4
# What a reference may import besides the library itself: a test module that needs more (transformers, a model zoo)
# does not import where the bot runs the reference, so nothing is taken from it.
_ALONE = frozenset({"torch", "triton", "numpy", "pytest", "einops", *sys.stdlib_module_names})
_BUILTINS = set(dir(builtins))
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.LShift: operator.lshift,
               ast.FloorDiv: operator.floordiv, ast.Pow: lambda a, b: a ** b if abs(b) < 64 else None}


@dataclass
class TestEvidence:
    """A reference, inputs and sizes read from one test of one launcher."""

    test: str  # "tests/test_x.py::test_name"
    line: int
    reference_symbol: str | None = None  # a function of the test module called with the launcher's arguments
    reference_code: str | None = None  # else: the generated reference function's body (one return)
    reference_params: list[str] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)  # import statements the generated code needs
    inputs_code: list[str] | None = None  # the generated inputs function's statements (None: not derived)
    inputs_params: list[str] = field(default_factory=list)
    dtype_params: list[str] = field(default_factory=list)  # params whose sizes are dtype names
    shapes: list[dict[str, object]] = field(default_factory=list)
    shapes_total: int = 0
    output_index: int | None = None  # which of the launcher's outputs the test compares (None: its whole result)
    notes: list[str] = field(default_factory=list)


def _name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _free_names(node: ast.AST) -> list[str]:
    return list(dict.fromkeys(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)))


class _DropDevice(ast.NodeTransformer):
    """Inputs are made under `with torch.device(target)`: a test's own device choice is dropped."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        node.keywords = [k for k in node.keywords if k.arg != "device"]
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "cuda" and not node.args:
            return func.value
        if isinstance(func, ast.Attribute) and func.attr == "to" and len(node.args) == 1 and not node.keywords:
            arg = node.args[0]
            text = ast.unparse(arg)
            if (isinstance(arg, ast.Constant) and isinstance(arg.value, str)) or _DEVICE_WORDS.search(text):
                return func.value
        return node


def _drop_device(node: ast.AST) -> ast.AST:
    return ast.fix_missing_locations(_DropDevice().visit(copy.deepcopy(node)))


def _literal(node: ast.expr, module: Module) -> tuple[bool, object]:
    """A parametrize value as YAML can hold it: numbers, strings, lists; `torch.float16` as 'float16'."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)) or (
            isinstance(node, ast.Constant) and node.value is None):
        return True, node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_literal(e, module) for e in node.elts]
        return all(ok for ok, _ in items), [v for _, v in items]
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:  # `1 << 20`, `2 * 1024`
        (ok_left, left), (ok_right, right) = _literal(node.left, module), _literal(node.right, module)
        if ok_left and ok_right and type(left) in (int, float) and type(right) in (int, float):
            try:
                return True, _ARITHMETIC[type(node.op)](left, right)
            except (ArithmeticError, ValueError, TypeError):
                return False, None
        return False, None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        ok, value = _literal(node.operand, module)
        return ok and isinstance(value, (int, float)), -value if ok and isinstance(value, (int, float)) else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return True, _DType(node.attr)
    if isinstance(node, ast.Name) and isinstance(module.defs.get(node.id), ast.Assign):
        return _literal(module.defs[node.id].value, module)  # type: ignore[attr-defined]
    return False, None


class _DType(str):
    """A torch dtype written in a test (`torch.float16`), kept as its name."""


def _parametrize(function: ast.FunctionDef, module: Module) -> list[tuple[list[str], list[list[object]]]]:
    found = []
    for decorator in function.decorator_list:
        if not (isinstance(decorator, ast.Call) and _name(decorator.func) == "parametrize" and len(decorator.args) >= 2):
            continue
        names_node, values_node = decorator.args[0], decorator.args[1]
        if isinstance(names_node, ast.Constant) and isinstance(names_node.value, str):
            names = [n.strip() for n in names_node.value.split(",") if n.strip()]
        elif isinstance(names_node, (ast.List, ast.Tuple)):
            names = [e.value for e in names_node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        else:
            continue
        if isinstance(values_node, ast.Name) and isinstance(module.defs.get(values_node.id), ast.Assign):
            values_node = module.defs[values_node.id].value  # type: ignore[attr-defined]
        if not isinstance(values_node, (ast.List, ast.Tuple)):
            continue
        rows: list[list[object]] = []
        for element in values_node.elts:
            if isinstance(element, ast.Call) and _name(element.func) == "param":
                element = ast.Tuple(elts=list(element.args), ctx=ast.Load()) if len(names) > 1 else element.args[0]
            ok, value = _literal(element, module)
            if not ok:
                continue
            row = list(value) if len(names) > 1 and isinstance(value, list) else [value]
            if len(row) == len(names):
                rows.append(row)
        found.append((names, rows))
    return found


def _constant_index(node: ast.expr) -> int | None:
    """`f(...)[1]` -> 1."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int:
        return node.slice.value
    return None


def _import_line(local: str, target: tuple[str, str | None]) -> str:
    module, symbol = target
    if symbol is None:
        return f"import {module}" if module == local else f"import {module} as {local}"
    return f"from {module} import {symbol}" + ("" if symbol == local else f" as {local}")


class _TestReader:
    def __init__(self, library: Library, module: Module, function: ast.FunctionDef, launcher: Launcher, call: ast.Call):
        self.library, self.module, self.function, self.launcher, self.call = library, module, function, launcher, call
        args = function.args
        self.params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg != "self"]
        self.before = [s for s in function.body if s.lineno <= call.lineno]
        self.assigns: dict[str, ast.expr] = {}
        counts: dict[str, int] = {}
        for stmt in ast.walk(function):
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            counts[n.id] = counts.get(n.id, 0) + 1
                if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    self.assigns[stmt.targets[0].id] = stmt.value
        self.once = {n for n, c in counts.items() if c == 1}
        self.evidence = TestEvidence(f"{module.rel}::{function.name}", call.lineno)

    # -- the launcher's arguments, in its own parameter order
    def call_arguments(self) -> list[ast.expr] | None:
        definition = self.launcher.module.defs[self.launcher.symbol]
        if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        positional = [a.arg for a in (*definition.args.posonlyargs, *definition.args.args)]
        if any(isinstance(a, ast.Starred) for a in self.call.args):
            return None
        values = list(self.call.args)
        for keyword in self.call.keywords:
            # Only keywords that continue the positional order: inputs are passed positionally.
            if keyword.arg not in positional or positional.index(keyword.arg) != len(values):
                return None
            values.append(keyword.value)
        return values

    def launcher_parameters(self) -> list[str]:
        definition = self.launcher.module.defs[self.launcher.symbol]
        assert isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef))  # call_arguments checked it
        return [a.arg for a in (*definition.args.posonlyargs, *definition.args.args)]

    def result_names(self) -> dict[str, int | None]:
        """Names the test binds to the launcher's result -> the index of the output each holds (None: all)."""
        names: dict[str, int | None] = {}
        for stmt in self.function.body:
            if not (isinstance(stmt, ast.Assign) and any(n is self.call for n in ast.walk(stmt.value))):
                continue
            index = _constant_index(stmt.value) if stmt.value is not self.call else None
            for target in stmt.targets:
                if isinstance(target, (ast.Tuple, ast.List)) and stmt.value is self.call:
                    names.update({e.id: i for i, e in enumerate(target.elts) if isinstance(e, ast.Name) and e.id != "_"})
                elif isinstance(target, ast.Name):
                    names[target.id] = index
        return names

    def expected(self) -> ast.expr | None:
        results = self.result_names()
        for node in ast.walk(self.function):
            if not (isinstance(node, ast.Call) and _COMPARE.search(_name(node.func)) and len(node.args) >= 2):
                continue
            a, b = node.args[0], node.args[1]
            for actual, other in ((a, b), (b, a)):
                inline = any(n is self.call for n in ast.walk(actual))
                bound = [n for n in _free_names(actual) if n in results]
                if (inline or bound) and not (set(_free_names(other)) & set(results)):
                    self.evidence.output_index = _constant_index(actual) if inline else results[bound[0]]
                    return self._follow(other)
        return None

    def _follow(self, node: ast.expr) -> ast.expr:
        for _ in range(3):
            if isinstance(node, ast.Name) and node.id in self.once and node.id in self.assigns:
                node = self.assigns[node.id]
            else:
                break
        return node

    def _aliases(self, arguments: list[ast.expr]) -> dict[str, str]:
        """Copies of one tensor: `x2 = x.clone().requires_grad_(True)` passed to the launcher makes `x` in the
        expected value mean the launcher's `x2`."""
        aliases: dict[str, str] = {}
        for argument in arguments:
            if not isinstance(argument, ast.Name) or argument.id not in self.once:
                continue
            value = self.assigns.get(argument.id)
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _COPIES:
                value = value.func.value
            if isinstance(value, ast.Name) and value is not self.assigns.get(argument.id):
                aliases.setdefault(value.id, argument.id)
        return aliases

    def _inline(self, node: ast.expr, keep: set[str], aliases: dict[str, str]) -> ast.expr:
        """The expected value with the test's own single-assigned locals written out (a few levels), so that
        it is an expression of the launcher's arguments alone."""
        reader = self

        class Inline(ast.NodeTransformer):
            def __init__(self, depth: int) -> None:
                self.depth = depth

            def visit_Name(self, name: ast.Name) -> ast.AST:
                if not isinstance(name.ctx, ast.Load) or name.id in keep:
                    return name
                if name.id in aliases:
                    return ast.copy_location(ast.Name(aliases[name.id], ast.Load()), name)
                value = reader.assigns.get(name.id)
                if self.depth > 0 and name.id in reader.once and value is not None:
                    return Inline(self.depth - 1).visit(copy.deepcopy(value))
                return name

        return ast.fix_missing_locations(Inline(3).visit(copy.deepcopy(node)))

    def known_outside(self, name: str) -> str | None:
        """An import line making `name` available to generated code, '' for a builtin, None when unknown."""
        if name in _BUILTINS:
            return ""
        if name in self.module.imports:
            return _import_line(name, self.module.imports[name])
        node = self.module.defs.get(name)
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not name.startswith("test"):
            return f"from {self.module.name} import {name}"
        return None

    def read(self) -> TestEvidence:
        ev = self.evidence
        arguments = self.call_arguments()
        if arguments is None:
            ev.notes.append("the test passes arguments the inputs cannot reproduce (*args, or skipped defaults)")
            return ev
        self._reference(arguments)
        self._inputs(arguments)
        return ev

    def _reference(self, arguments: list[ast.expr]) -> None:
        ev = self.evidence
        expected = self.expected()
        if expected is None:
            ev.notes.append("no comparison of the launcher's result with another expression")
            return
        names = self.launcher_parameters()
        params = [a.id if isinstance(a, ast.Name) else names[i] for i, a in enumerate(arguments)]
        if len(set(params)) != len(params):
            ev.notes.append("the launcher is called with one name twice")
            return
        if (isinstance(expected, ast.Call) and isinstance(expected.func, ast.Name) and not expected.keywords
                and [ast.unparse(a) for a in expected.args] == [ast.unparse(a) for a in arguments]
                and isinstance(self.module.defs.get(expected.func.id), ast.FunctionDef)):
            ev.reference_symbol = expected.func.id
            return
        launcher_args = {a.id for a in arguments if isinstance(a, ast.Name)}
        body = _drop_device(self._inline(expected, launcher_args, self._aliases(arguments)))
        imports = []
        for name in _free_names(body):
            if name in params:
                continue
            ref = self.library.resolve(self.module, name)
            if ref is not None and ref.symbol is not None and not is_test_file(ref.module.rel):
                ev.notes.append(f"the expected value {ast.unparse(expected)[:80]!r} calls the library's own "
                                f"{name!r}, not an independent PyTorch expression")
                return
            line = self.known_outside(name)
            if line is None:
                ev.notes.append(f"the expected value {ast.unparse(expected)[:80]!r} uses {name!r}, which is built "
                                "in the test from more than the launcher's arguments")
                return
            if line:
                imports.append(line)
        ev.reference_code = f"return {ast.unparse(body)}"
        ev.reference_params = params
        ev.imports = list(dict.fromkeys([*ev.imports, *imports]))

    def _inputs(self, arguments: list[ast.expr]) -> None:
        ev = self.evidence
        statements: list[ast.stmt] = []
        params: list[str] = []
        imports: list[str] = []
        pending = [n for a in arguments for n in _free_names(a)]
        included: set[str] = set()
        taken: set[int] = set()  # statements already copied (one may bind several needed names)
        while pending:
            name = pending.pop()
            if name in included:
                continue
            included.add(name)
            stmt = next((s for s in reversed(self.before) if isinstance(s, ast.Assign) and s.lineno < self.call.lineno
                         and any(isinstance(n, ast.Name) and n.id == name for t in s.targets for n in ast.walk(t))), None)
            if stmt is not None:
                if id(stmt) in taken:
                    continue
                taken.add(id(stmt))
                cleaned = _drop_device(stmt)
                statements.append(cleaned)  # type: ignore[arg-type]
                pending.extend(_free_names(cleaned.value))  # type: ignore[attr-defined]
            elif name in self.params:
                params.append(name)
            elif (line := self.known_outside(name)) is not None:
                if line:
                    imports.append(line)
            elif isinstance(self.module.defs.get(name), ast.Assign):
                ok, value = _literal(self.module.defs[name].value, self.module)  # type: ignore[attr-defined]
                if not ok or isinstance(value, _DType):
                    ev.notes.append(f"the inputs use the test module's {name!r}, which is not a literal")
                    return
                statements.append(ast.parse(f"{name} = {value!r}").body[0])
            else:
                ev.notes.append(f"the inputs use {name!r}, which the test does not define (a fixture?)")
                return
        statements.sort(key=lambda s: s.lineno if hasattr(s, "lineno") and s.lineno else 0)
        sizes = _parametrize(self.function, self.module)
        by_name = {n: i for i, (names, _) in enumerate(sizes) for n in names}
        unsized = [p for p in params if p not in by_name]
        if unsized:
            ev.notes.append(f"the inputs need {', '.join(unsized)}, which no parametrize gives (a fixture?)")
            return
        ordered = sorted(params, key=lambda p: self.params.index(p))
        combos = _size_combinations(sizes, by_name, ordered)
        if not combos:
            ev.notes.append("the parametrize values are not literals")
            return
        ev.dtype_params = [p for p in ordered if any(isinstance(c.get(p), _DType) for c in combos)]
        ev.shapes = [{k: (str(v) if isinstance(v, _DType) else v) for k, v in c.items()} for c in _largest(combos)]
        ev.shapes_total = len(combos)
        returned = ", ".join(ast.unparse(_drop_device(a)) for a in arguments)
        ev.inputs_code = [ast.unparse(s) for s in statements] + [f"return ({returned}{',' if len(arguments) == 1 else ''})"]
        ev.inputs_params = ordered
        ev.imports = list(dict.fromkeys([*ev.imports, *imports]))


def _size_combinations(sizes: list[tuple[list[str], list[list[object]]]], by_name: dict[str, int],
                       wanted: list[str]) -> list[dict[str, object]]:
    """Every combination of the parametrize rows that give the `wanted` parameters, each once, as keyword
    arguments (stacked parametrize decorators multiply)."""
    used = sorted({by_name[p] for p in wanted})
    combos: list[dict[str, object]] = []
    for rows in itertools.product(*(sizes[i][1] for i in used)):
        shape: dict[str, object] = {}
        for i, row in zip(used, rows, strict=True):
            for n, v in zip(sizes[i][0], row, strict=True):
                if n in wanted:
                    shape[n] = v
        if shape not in combos:
            combos.append(shape)
    return combos


def foreign_import(library: Library, name: str, seen: set[str] | None = None) -> str | None:
    """The first package outside the library (and torch, triton, numpy, pytest, the standard library) that importing
    module `name` needs, following the library's own modules (its test helpers too); None: it imports alone."""
    seen = set() if seen is None else seen
    if name in seen:
        return None
    seen.add(name)
    module = library.find_module(name)
    if module is None:
        top = name.split(".")[0]
        return None if top in _ALONE or top in library.by_name else top
    for node in ast.walk(module.tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [node.module]
        elif isinstance(node, ast.ImportFrom) and node.module:  # relative: within the library
            package = module.name if module.is_package else module.name.rpartition(".")[0]
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
            targets = [f"{base}.{node.module}".strip(".")]
        for target in targets:
            found = foreign_import(library, target, seen)
            if found is not None:
                return found
    return None


def _imported_modules(lines: list[str]) -> list[str]:
    names: list[str] = []
    for line in lines:
        for node in ast.walk(ast.parse(line)):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
    return names


def _keep_only_what_imports_alone(library: Library, test: Module, ev: TestEvidence) -> None:
    """A reference from a test is taken only where it imports with the library alone."""
    needed = ([test.name] if ev.reference_symbol else []) + _imported_modules(ev.imports)
    foreign = next((f for f in (foreign_import(library, n) for n in needed) if f is not None), None)
    if foreign is not None and (ev.reference_symbol or ev.reference_code):
        ev.notes.append(f"its reference needs {foreign!r}, which the library alone does not provide")
        ev.reference_symbol = ev.reference_code = None
        ev.inputs_code = None


def _largest(combos: list[dict[str, object]]) -> list[dict[str, object]]:
    """The _MAX_SHAPES largest size sets (by the product of their integers), in the test's order: a test's first
    sizes are often its smallest, which time launch overhead rather than the kernel."""
    def size(combo: dict[str, object]) -> int:
        product = 1
        for value in combo.values():
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                product *= value
        return product

    chosen = set(sorted(range(len(combos)), key=lambda i: -size(combos[i]))[:_MAX_SHAPES])
    return [c for i, c in enumerate(combos) if i in chosen]


def read_tests(library: Library, launchers: list[Launcher]) -> dict[tuple[str, str], TestEvidence]:
    """For each launcher (keyed by (file, symbol)) the first test that gives a reference, or failing that the
    first that calls it (its notes say what is missing)."""
    wanted = {(la.module.rel, la.symbol): la for la in launchers if la.kind == "function"}
    found: dict[tuple[str, str], TestEvidence] = {}
    for module in library.modules():
        if not is_test_file(module.rel):
            continue
        functions = [n for n in module.tree.body if isinstance(n, ast.FunctionDef)]
        functions += [m for c in module.tree.body if isinstance(c, ast.ClassDef) for m in c.body
                      if isinstance(m, ast.FunctionDef)]
        for function in functions:
            if not function.name.startswith("test"):
                continue
            for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
                ref = library.resolve_expr(module, call.func)
                if ref is None or ref.symbol is None or (ref.module.rel, ref.symbol) not in wanted:
                    continue
                key = (ref.module.rel, ref.symbol)
                if key in found and (found[key].reference_code or found[key].reference_symbol):
                    continue
                evidence = _TestReader(library, module, function, wanted[key], call).read()
                _keep_only_what_imports_alone(library, module, evidence)
                if key not in found or evidence.reference_code or evidence.reference_symbol:
                    found[key] = evidence
    return found
