"""The text of one proposed kforge.yaml entry: a Triton launcher's (with what its tests or a checked draft gave)
or a torch extension file's, and the references module that holds what the tests gave."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from kforge_bot.init.scan.from_tests import TestEvidence
from kforge_bot.init.scan.launchers import Launcher
from kforge_bot.init.scan.modules import Module
from kforge_bot.init.scan.vendors import vendor_of, vendor_target
from kforge_bot.kernelspec import defines

REFERENCE_NAMES = ("reference", "ref", "torch_reference", "reference_impl")
INPUT_NAMES = ("make_inputs", "get_inputs", "inputs")
REFERENCES_MODULE = "kforge_references.py"  # where init writes the references and inputs it read from tests


def launcher_vendor(launcher: Launcher) -> str | None:
    own = vendor_of(launcher.module.rel)
    if own is not None:
        return own
    vendors = {vendor_of(k.module.rel) for k in launcher.kernels}
    return vendors.pop() if len(vendors) == 1 else None



def needs_draft(launcher: Launcher, found: TestEvidence | None) -> bool:
    """Whether neither the launcher's file nor its tests give a reference and inputs."""
    source = launcher.module.source
    own = any(defines(source, n) for n in REFERENCE_NAMES) and any(defines(source, n) for n in INPUT_NAMES)
    from_tests = found is not None and bool(found.reference_code or found.reference_symbol) \
        and found.inputs_code is not None
    return launcher.kind == "function" and not own and not from_tests


def launcher_entry(name: str, launcher: Launcher, backward: list[str], found: TestEvidence | None,
                   counts: Counter[str], draft: Any = None, triton_targets: list[str] | None = None
                   ) -> tuple[str, list[tuple[str, list[str]]]]:
    """One launcher's entry, and the functions (text, imports) it names in the references module. `draft`: what
    `--draft` gave (an init.draft.DraftOutcome), None where it did not run."""
    module = launcher.module
    rel = module.rel
    kernels = ", ".join(k.name if k.module is module else f"{k.name} ({k.module.rel})" for k in launcher.kernels)
    autotuned = [k.name for k in launcher.kernels if k.autotuned]
    what = f"{launcher.symbol} launches {kernels}" + (f"; autotuned: {', '.join(autotuned)}" if autotuned else "")
    elsewhere = sorted({k.module.rel for k in launcher.kernels if k.module is not module})
    lines = [f"  {name}:  # {what}", f"    file: {elsewhere[0] if elsewhere else rel}"]
    if len(elsewhere) > 1:
        lines.append(f"    # the kernels live in {', '.join(elsewhere)}; optimize rewrites only `file:`")
    entry = f"{rel}:{launcher.symbol}" if elsewhere else launcher.symbol
    lines.append(f"    entry: {entry}" + ("  # an nn.Module: give its constructor's arguments in init:"
                                          if launcher.kind == "module" else ""))
    if draft is not None:
        lines.append(f"    # draft: {draft.note}; review")
    drafted = draft if draft is not None and draft.accepted else None
    generated: list[tuple[str, list[str]]] = []
    slug = re.sub(r"\W", "_", name)
    lines.append(_reference_line(module, slug, found, counts, drafted, generated))
    own_inputs = next((n for n in INPUT_NAMES if defines(module.source, n)), None)
    lines.append(_inputs_line(module, own_inputs, slug, found, counts, drafted, generated))
    lines += _shapes_lines(module, own_inputs, found, counts, drafted)
    lines += _returns_lines(launcher, found)
    lines += _backward_lines(launcher, backward)
    lines += _placement_lines(launcher, triton_targets)
    return "\n".join(lines), generated


def _reference_line(module: Module, slug: str, found: TestEvidence | None, counts: Counter[str], drafted: Any,
                    generated: list[tuple[str, list[str]]]) -> str:
    """`reference:` from the launcher's own file, a checked draft, the tests (a function they define, or their
    expression written into the references module, appended to `generated`), else a TODO."""
    rel = module.rel
    review = f"  # from {found.test}; review" if found is not None else ""
    own_reference = next((n for n in REFERENCE_NAMES if defines(module.source, n)), None)
    if own_reference:
        return f"    reference: {rel}:{own_reference}"
    if drafted is not None:
        return f"    reference: {drafted.file}:reference  # drafted; review"
    if found is not None and found.reference_symbol:
        counts["references_from_tests"] += 1
        return f"    reference: {found.test.split('::')[0]}:{found.reference_symbol}{review}"
    if found is not None and found.reference_code:
        symbol = f"{slug}_reference"
        generated.append(_function(symbol, found.reference_params, [found.reference_code], found, "reference"))
        counts["references_from_tests"] += 1
        return f"    reference: {REFERENCES_MODULE}:{symbol}{review}"
    why = f" ({found.test}: {'; '.join(found.notes)})" if found is not None and found.notes else ""
    return f"    reference: {rel}:reference  # TODO: write reference(...), the same call in plain PyTorch{why}"


def _inputs_line(module: Module, own_inputs: str | None, slug: str, found: TestEvidence | None, counts: Counter[str],
                 drafted: Any, generated: list[tuple[str, list[str]]]) -> str:
    """`inputs:`, from the same places as the reference, in the same order."""
    rel = module.rel
    if own_inputs:
        return f"    inputs: {rel}:{own_inputs}"
    if drafted is not None:
        return f"    inputs: {drafted.file}:make_inputs  # drafted; review"
    if found is not None and found.inputs_code is not None:
        symbol = f"{slug}_inputs"
        body = [f"if isinstance({p}, str):\n    {p} = getattr(torch, {p})" for p in found.dtype_params]
        generated.append(_function(symbol, found.inputs_params, body + found.inputs_code, found, "inputs"))
        counts["inputs_from_tests"] += 1
        review = f"  # from {found.test}; review"
        return f"    inputs: {REFERENCES_MODULE}:{symbol}{review}"
    return f"    inputs: {rel}:make_inputs  # TODO: write make_inputs(**shape) returning the call's arguments"


def _shapes_lines(module: Module, own_inputs: str | None, found: TestEvidence | None, counts: Counter[str],
                  drafted: Any) -> list[str]:
    """`shapes:` from a checked draft or the tests' parametrize, else one TODO mapping (naming what the launcher's
    own inputs callable needs)."""
    if drafted is not None and not own_inputs:
        return ["    shapes:  # drafted; review", *(f"      - {_flow(shape)}" for shape in drafted.shapes)]
    if not own_inputs and found is not None and found.inputs_code is not None and found.shapes:
        more = f", the largest {len(found.shapes)} of {found.shapes_total}" \
            if found.shapes_total > len(found.shapes) else ""
        counts["shapes_from_tests"] += 1
        return [f"    shapes:  # from {found.test} (pytest.mark.parametrize{more}); review",
                *(f"      - {_flow(shape)}" for shape in found.shapes)]
    required = _required_parameters(module.defs.get(own_inputs)) if own_inputs else []
    return ["    shapes:", "      - {}  # " + (
        f"TODO: {own_inputs} needs {', '.join(required)}: one mapping per size, e.g. "
        f"{{{', '.join(f'{p}: ...' for p in required)}}}" if required else
        "TODO: keyword arguments for the inputs callable, one mapping per size to check and time"
        if not own_inputs else f"{own_inputs}'s defaults; add a mapping per size to check and time")]


def _placement_lines(launcher: Launcher, triton_targets: list[str] | None) -> list[str]:
    """`import_roots:` where the module imports under a shorter name than its path, `targets:` and `language:`."""
    module = launcher.module
    rel = module.rel
    lines = []
    root = "/".join(rel.split("/")[:len(rel.split("/")) - len(module.name.split(".")) - (module.is_package)])
    if root:
        lines.append(f"    import_roots: [{root}]  # {rel} imports as `{module.name}`")
    target = vendor_target(launcher_vendor(launcher) or "") or None
    lines.append(f"    targets: [{target or ', '.join(triton_targets or ['cuda'])}]")
    lines.append("    language: triton")
    return lines


def parameters(node: ast.stmt) -> list[str]:
    """A launcher's parameters (an autograd.Function's forward's, less ctx)."""
    if isinstance(node, ast.ClassDef):
        node = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), node)
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    return [n for n in names if n not in ("self", "ctx", "cls")]


def _returned_names(node: ast.stmt) -> list[list[str]]:
    """Each `return`'s values as names ('' for anything else) of a function (not of functions inside it)."""
    found: list[list[str]] = []
    pending = list(ast.iter_child_nodes(node))
    while pending:
        sub = pending.pop()
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(sub, ast.Return) and sub.value is not None:
            values = sub.value.elts if isinstance(sub.value, ast.Tuple) else [sub.value]
            found.append([v.id if isinstance(v, ast.Name) else "" for v in values])
        pending.extend(ast.iter_child_nodes(sub))
    return found


def _returns_lines(launcher: Launcher, found: TestEvidence | None) -> list[str]:
    """`outputs:` and `inplace:` as the launcher's code shows them: inputs it returns are written in place (RoPE's
    q and k); of several values returned, the one the tests compare (else the first) is the result."""
    node = launcher.module.defs[launcher.symbol]
    if launcher.kind != "function":
        return []
    params = parameters(node)
    returns = _returned_names(node)
    if len(returns) == 1 and returns[0] and all(n in params for n in returns[0]):
        return ["    outputs: []  # it returns its inputs: written in place", f"    inplace: [{', '.join(returns[0])}]"]
    if any(len(r) > 1 for r in returns):
        if found is not None and found.output_index is not None:
            return [f"    outputs: {found.output_index}  # it returns several values; {found.test} compares this one"]
        return ["    outputs: 0  # it returns several values: the first taken as the result; review"]
    return []


def _backward_lines(launcher: Launcher, backward: list[str]) -> list[str]:
    """`backward:` where the code shows it: an autograd.Function (autograd through it), or a backward launcher whose
    parameters are the upstream gradient, the forward's inputs and the values the forward returns."""
    node = launcher.module.defs[launcher.symbol]
    if launcher.kind == "autograd":
        tensors = _float_tensor_parameters(node)
        return [f"    backward: {{inputs: [{', '.join(tensors)}]}}  # review: the inputs whose gradients count"] \
            if tensors else []
    for name in backward:
        mapped = _backward_args(node, launcher.module.defs.get(name))
        if mapped is not None:
            args, inputs = mapped
            return [f"    backward: {{inputs: [{', '.join(inputs)}], launcher: {name}, args: [{', '.join(args)}]}}"
                    "  # review"]
    return [f"    # backward launcher {name} (its arguments could not be matched to the forward's; see docs/manifest.md"
            " for backward:)" for name in backward]


_NOT_DIFFERENTIABLE = re.compile(r"eps|dim|scale|target|labels?|ignore_index|index|indices|mask|training|"
                                 r"reduction|.*_(func|mode|size|p)$|(in_)?place|offset|position_ids", re.I)


def _float_tensor_parameters(node: ast.stmt) -> list[str]:
    """An autograd.Function's inputs that can carry gradients: those its forward annotates as tensors (where it
    annotates any), less targets, indices and masks; else the parameters whose names say no setting."""
    forward = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None) \
        if isinstance(node, ast.ClassDef) else None
    names = parameters(node)
    if forward is not None:
        annotated = {a.arg: ast.unparse(a.annotation) for a in (*forward.args.posonlyargs, *forward.args.args)
                     if a.annotation is not None}
        if annotated:
            names = [n for n in names if "Tensor" in annotated.get(n, "")]
    return [n for n in names if not _NOT_DIFFERENTIABLE.fullmatch(n)][:4]


def _backward_args(forward: ast.stmt, backward: ast.stmt | None) -> tuple[list[str], list[str]] | None:
    """The backward launcher's arguments as grad.N / input.NAME / output.N, and the inputs it returns gradients of
    (`dx` for `x`), or None when a parameter matches nothing."""
    if backward is None:
        return None
    params = parameters(forward)
    outputs = next((r for r in _returned_names(forward) if len(r) > 1), [])
    args: list[str] = []
    grads = 0
    for name in parameters(backward):
        if name in params:
            args.append(f"input.{name}")
        elif name in outputs and outputs.index(name) > 0:
            args.append(f"output.{outputs.index(name)}")
        elif re.fullmatch(r"(d|grad_?)\w+", name) and grads == 0:
            args.append("grad.0")
            grads += 1
        else:
            return None
    returned = next(iter(_returned_names(backward)), [])
    inputs = [re.sub(r"^(d|grad_?)", "", n) for n in returned]
    if not inputs or not all(n in params for n in inputs) or grads != 1:
        return None
    return args, inputs


def _flow(shape: dict[str, object]) -> str:
    return yaml.safe_dump(shape, default_flow_style=True, sort_keys=False, width=10_000).strip()


def _function(symbol: str, params: list[str], body: list[str], found: TestEvidence, role: str) -> tuple[str, list[str]]:
    """A generated function's text and the imports it needs."""
    indented = "\n".join("    " + line for stmt in body for line in stmt.splitlines())
    head = f"def {symbol}({', '.join(params)}):"
    return f"{head}  # {role} from {found.test} (line {found.line}); review\n{indented}\n", list(found.imports)


def references_module(parts: list[tuple[str, list[str]]]) -> str:
    imports = ["import torch", *(line for _, needed in parts for line in needed)]
    functions = [text for text, _ in parts]
    return ('"""References and inputs that `kforge-bot init` read from the repository\'s tests: review each before\n'
            'trusting a verdict on it."""\n\n' + "\n".join(dict.fromkeys(imports)) + "\n\n\n" + "\n\n".join(functions))




def extension_language(source: str) -> str | None:
    if "load_inline(" in source or re.search(r"cpp_extension\.load\(|from torch\.utils\.cpp_extension import", source):
        return "cuda" if ("__global__" in source or "cuda_sources" in source or ".cu" in source) else "cpp"
    return None


def extension_entry(rel: str, name: str, module: Module, language: str) -> str:
    functions = [node for node in module.tree.body if isinstance(node, ast.FunctionDef)]
    public = [f.name for f in functions if not f.name.startswith("_")]
    reference = next((n for n in REFERENCE_NAMES if n in public), None)
    inputs = next((n for n in INPUT_NAMES if n in public), None)
    required = _required_parameters(module.defs.get(inputs or ""))
    callable_ = [n for n in public if n not in (reference, inputs)]
    entry = callable_[0] if callable_ else f"TODO_{Path(rel).stem}"
    others = f"; other public functions: {', '.join(callable_[1:])}" if len(callable_) > 1 else ""
    targets = "[cuda]" if language == "cuda" else "[cpu, cuda]"
    lines = [f"  {name}:  # {rel}: a torch {language} extension{others}",
             f"    file: {rel}",
             f"    entry: {entry}" + ("  # TODO: the function that launches the kernel" if not callable_ else ""),
             f"    reference: {rel}:{reference or 'reference'}"
             + ("" if reference else "  # TODO: write reference(...), the same call in plain PyTorch"),
             f"    inputs: {rel}:{inputs or 'make_inputs'}"
             + ("" if inputs else "  # TODO: write make_inputs(**shape) returning the call's arguments"),
             "    shapes:",
             "      - {}  # " + (f"TODO: {inputs} needs {', '.join(required)}: one mapping per size, e.g. "
                             f"{{{', '.join(f'{p}: ...' for p in required)}}}" if required else
                             "TODO: keyword arguments for the inputs callable, one mapping per size to check and time"
                             if inputs is None else f"{inputs}'s defaults; add a mapping per size to check and time"),
             f"    targets: {targets}",
             f"    language: {language}"]
    return "\n".join(lines)


def _required_parameters(function: ast.stmt | None) -> list[str]:
    """The parameters an inputs callable has no default for (a shape set must give them)."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    without = positional[:len(positional) - len(args.defaults)]
    keyword = [a for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    return [a.arg for a in (*without, *keyword) if a.arg != "device"]
