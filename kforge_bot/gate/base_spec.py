"""A changed kernel is judged by the base's test: the head contributes its kernel's code and nothing else. The
reference, inputs, init, shapes, tolerance, seeds and targets, what a call is compared on (outputs, in-place inputs,
backward), which shape sets are timed, and the modules the reference imports beside it (GPU MODE's task.py and
utils.py) are the base's. A kernel cannot vouch for itself by editing its own test in the same pull request.

`judged_spec` builds the spec a head kernel is measured under; `spec_changes` names what of its test the head
changed (the gate's and the PR bot's `spec-changed`). Which test is used never depends on `spec_changes` being
complete: the base's is always the one that decides unless a maintainer's label lets the head's count."""

from __future__ import annotations

import ast
from dataclasses import replace

from kforge_bot.kernelspec import Implementation, KernelSpec, has_own_reference, kernel_implementation

# What a kernel's test is made of, as `spec_changes` names it.
TEST_PARTS = ("reference", "inputs", "init", "shapes", "tolerance", "seeds", "targets", "outputs", "inplace",
              "backward", "timed", "support", "kwargs", "env", "constraints")
# What the head contributes: its kernel's code and where that code lives. Every other field of a KernelSpec is the
# base's (judged_spec), so a key added to the manifest later is the base's without anyone listing it here.
HEAD_FIELDS = ("name", "format", "root", "kernel_file", "entry", "baseline", "language", "import_roots", "entry_file",
               "kernel")


def judged_spec(head: KernelSpec, base: KernelSpec) -> KernelSpec:
    """The head's kernel (HEAD_FIELDS: its file, entry, code, root, language and import roots) under the base's test,
    on the base's targets (a change cannot drop the device the gate runs on). Each Implementation keeps its own root,
    so the base's reference imports the base's helpers; the modules written beside every implementation (`support`)
    are the base's too, so the reference never imports a module the head wrote."""
    return replace(base, **{name: getattr(head, name) for name in HEAD_FIELDS})


def spec_changes(base: KernelSpec, head: KernelSpec) -> list[str]:
    """The parts of the kernel's test (TEST_PARTS) that differ between base and head. Code that shares the kernel's
    file is compared by its own definition, so editing the kernel next to its reference changes no test."""
    base_kernel, head_kernel = kernel_implementation(base), kernel_implementation(head)
    changed = []
    if has_own_reference(base) != has_own_reference(head) or (
            has_own_reference(head) and _code(base.reference, base_kernel) != _code(head.reference, head_kernel)):
        changed.append("reference")
    if _code(replace(base.inputs_source, symbol=base.inputs_symbol), base_kernel) != \
            _code(replace(head.inputs_source, symbol=head.inputs_symbol), head_kernel):
        changed.append("inputs")
    base_init = _code(replace(base.inputs_source, symbol=base.init_symbol), base_kernel) if base.init_symbol else None
    head_init = _code(replace(head.inputs_source, symbol=head.init_symbol), head_kernel) if head.init_symbol else None
    if (base_init, base.init_kwargs) != (head_init, head.init_kwargs):
        changed.append("init")
    if list(base.shape_sets) != list(head.shape_sets):
        changed.append("shapes")
    if (base.tolerance, base.backward_tolerance) != (head.tolerance, head.backward_tolerance):
        changed.append("tolerance")
    if base.seeds != head.seeds:
        changed.append("seeds")
    if tuple(base.targets) != tuple(head.targets):
        changed.append("targets")
    if base.outputs != head.outputs:
        changed.append("outputs")
    if base.inplace != head.inplace:
        changed.append("inplace")
    if (base.grad_inputs, base.grad_inplace, base.backward_launcher) != \
            (head.grad_inputs, head.grad_inplace, head.backward_launcher):
        changed.append("backward")
    if base.timed_indices() != head.timed_indices():
        changed.append("timed")
    if sorted(base.support) != sorted(head.support):
        changed.append("support")
    if base.call_kwargs != head.call_kwargs:
        changed.append("kwargs")
    if base.env != head.env:
        changed.append("env")
    if base.constraints != head.constraints:
        changed.append("constraints")
    return changed


def _code(impl: Implementation, kernel: Implementation) -> tuple[str, str, str]:
    """What a part of the test is: its symbol and file, and its whole file's text, or only its own definition when
    it lives in the kernel's file."""
    if impl.filename == kernel.filename and impl.source == kernel.source:
        return impl.symbol, impl.filename, _definition(impl.source, impl.symbol)
    return impl.symbol, impl.filename, impl.source


def _definition(source: str, symbol: str) -> str:
    """Every top-level statement that binds `symbol` in `source`, in order (Python keeps the last: a second one
    further down is a change too), or the whole source where none does or it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    found = [ast.get_source_segment(source, node) or ast.dump(node) for node in tree.body
             if symbol in _bound_names(node)]
    return "\n".join(found) if found else source


def _bound_names(node: ast.stmt) -> list[str]:
    """The names a top-level statement binds: a def or class, an assignment's plain targets, an import's names."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
    return [n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)]
