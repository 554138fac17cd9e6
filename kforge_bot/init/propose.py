"""A proposed kforge.yaml for an existing repository (`kforge-bot init [REPO]`).

It reads (never imports) the repository's Python files (kforge_bot.init.scan) and proposes an entry for each
public launcher of a Triton kernel (`@triton.jit`, `@triton.autotune`, `f = triton.jit(g)`), found through the
call graph across modules, and one for each file with a torch C++/CUDA extension (`load_inline`,
`cpp_extension.load`). Other vendors' backend folders are left out (or proposed for their own target). Where
the repository's tests compare a launcher's result with a PyTorch expression, that expression becomes the
reference and the test's parametrized sizes the shapes, written to a references module and marked for review.
What the user must still write is marked TODO. KernelBench problems need no entry and are listed as comments.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kforge_bot.config import reader
from kforge_bot.errors import KforgeError
from kforge_bot.init.entries import (INPUT_NAMES, REFERENCE_NAMES, extension_entry, extension_language,
                                     launcher_entry, launcher_vendor, needs_draft, parameters, references_module)
from kforge_bot.init.files import already_managed, library_files
from kforge_bot.init.scan.device_queries import import_time_queries
from kforge_bot.init.scan.from_tests import TestEvidence, read_tests
from kforge_bot.init.scan.launchers import CallGraph, Launcher, Node, is_benchmark_file, is_test_file
from kforge_bot.init.scan.modules import Library, Module
from kforge_bot.init.scan.vendors import vendor_of, vendor_target
from kforge_bot.kernelspec import MAX_MANIFEST_KERNELS, defines, is_kernelbench_source


@dataclass
class ManifestProposal:
    """The proposed manifest, the references module it names (None: nothing generated), and what was found."""

    manifest: str
    references: str | None
    entries: int
    counts: Counter[str] = field(default_factory=Counter)
    drafts: dict[str, str] = field(default_factory=dict)  # repository-relative path -> drafted module (checked)


def propose_library(repo: Path, drafter: Callable[..., Any] | None = None, draft_limit: int = 0,
                    scan: tuple[str, ...] = ()) -> ManifestProposal:
    """The proposed manifest for the repository at `repo`; `drafter` (init --draft) is asked for up to
    `draft_limit` launchers that neither their file nor the tests give a reference and inputs; `scan` (folders
    relative to `repo`) limits the library to them (tests are read wherever they are)."""
    files = sorted(library_files(repo, scan))
    library = Library.read(repo, files)
    graph = CallGraph.build(library)
    launchers, orphans = graph.launchers()
    launchers = _prefer_exported(library, graph, launchers)
    kernel_files = {k[0] for k in graph.kernels} | {la.module.rel for la in launchers}
    state = _State(library, already_managed(repo), Counter(), _triton_targets(library))
    state.counts["kernels"] = len(graph.kernels)
    state.counts["kernels_launched"] = sum(1 for k in graph.kernels if graph.launched(k))
    state.counts["helpers_avoided"] = len(_helpers(library, graph, launchers, kernel_files))

    by_module: dict[str, list[Launcher]] = {}
    for launcher in launchers:
        vendor = launcher_vendor(launcher)
        if vendor is not None and vendor_target(vendor) is None:
            state.skip(vendor, f"{launcher.module.rel}:{launcher.symbol}")
        else:
            by_module.setdefault(launcher.module.rel, []).append(launcher)
    evidence = read_tests(library, launchers)
    for rel, group in by_module.items():
        _launcher_entries(state, rel, group, evidence, drafter, draft_limit)
    for path in files:
        _extension_or_kernelbench(state, path.relative_to(repo).as_posix(), kernel_files)
    _kernel_notes(state, graph, orphans)

    head = ["# kforge.yaml proposed by `kforge-bot init`: fill in each TODO and review what is marked 'review',",
            "# then run `kforge-bot list` and `kforge-bot check --all`. Keys: docs/manifest.md.",
            "version: 1"]
    if not state.entries:
        head.append("# no new Triton or torch-extension kernel files to propose (KernelBench problems need no entry)")
    else:
        head.append("kernels:")
    # Other vendors' backend folders ask for their own devices, and no kforge target imports them.
    queries = [q for q in import_time_queries(library) if vendor_of(q.rel) is None or vendor_target(vendor_of(q.rel))] \
        if state.entries else []
    if queries:  # one line: such a library raises at import on a CPU machine (evaluate.device_import says so there)
        state.notes.append(f"# needs a GPU to import: {queries[0]} asks for the device when imported"
                           + (f" (+{len(queries) - 1} more)" if len(queries) > 1 else "")
                           + "; run `kforge-bot list --import` and `check` on a GPU runner")
    notes = state.notes + [
        f"# skipped {len(where)} launcher(s) in {vendor}'s backend folders (no kforge target runs them): "
        + ", ".join(where[:3]) + (f", ... ({len(where) - 3} more)" if len(where) > 3 else "")
        for vendor, where in sorted(state.skipped.items())]
    state.counts["entries"] = len(state.entries)
    if len(state.entries) > MAX_MANIFEST_KERNELS:  # a proposal no manifest could hold: never written, never shown
        raise KforgeError(f"{len(state.entries)} entries found, over the cap of {MAX_MANIFEST_KERNELS} kernels in "
                          "one manifest", path=repo, hint="propose one part at a time: `kforge-bot init REPO "
                                                          "FOLDER` scans only FOLDER (e.g. the package's ops/)")
    module_text = references_module(state.references) if state.references else None
    return ManifestProposal("\n".join(head + state.entries + notes) + "\n", module_text, len(state.entries), state.counts,
                    state.drafts)


@dataclass
class _State:
    """What one proposal collects as it goes."""

    library: Library
    managed: dict[str, dict[str, str]]
    counts: Counter[str]
    targets: list[str] = field(default_factory=lambda: ["cuda"])  # a generic Triton kernel's targets
    entries: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    references: list[tuple[str, list[str]]] = field(default_factory=list)
    drafts: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    names: _Names = field(default_factory=lambda: _Names())

    def skip(self, vendor: str, where: str) -> None:
        self.skipped.setdefault(vendor, []).append(where)
        self.counts["vendor_entries_skipped"] += 1


def _launcher_entries(state: _State, rel: str, group: list[Launcher], evidence: dict[tuple[str, str], TestEvidence],
                      drafter: Callable[..., Any] | None, draft_limit: int) -> None:
    """The entries of one module's launchers: forward ones, each with its backward launchers noted."""
    forward = [la for la in group if not la.is_backward] or group
    backward = [la for la in group if la.is_backward and la not in forward]
    state.counts["backward_launchers"] += len(backward)
    pairs = _pair_backward(forward, backward)
    for launcher in forward:
        if launcher.symbol in state.managed.get(rel, {}):
            state.notes.append(f"# {rel}:{launcher.symbol}: already in {state.managed[rel][launcher.symbol]}")
            continue
        name = state.names.take(launcher.module, launcher.symbol, state.library, several=len(forward) > 1)
        found = evidence.get((rel, launcher.symbol))
        draft = None
        if drafter is not None and state.counts["drafts_tried"] < draft_limit and needs_draft(launcher, found):
            state.counts["drafts_tried"] += 1
            draft = drafter(name, re.sub(r"\W", "_", name), launcher, found)
            if draft.accepted:
                state.counts["drafts_accepted"] += 1
                state.drafts[draft.file] = draft.source
        text, generated = launcher_entry(name, launcher, pairs.get(launcher.symbol, []), found, state.counts, draft,
                                          state.targets)
        state.entries.append(text)
        state.references.extend(generated)
        function = _autograd_user(state, launcher)
        if function is not None:  # its backward, checked through autograd with the forward's inputs
            text, generated = launcher_entry(f"{name}.autograd", function, [], found, state.counts, None,
                                              state.targets)
            state.entries.append(text)
            state.references.extend(generated)


def _extension_or_kernelbench(state: _State, rel: str, kernel_files: set[str]) -> None:
    """Torch extensions get one entry per file; KernelBench files and candidates a note."""
    module = state.library.by_rel.get(rel)
    if module is None or rel in kernel_files:
        return
    if is_kernelbench_source(module.source):
        state.notes.append(f"# {rel}: a KernelBench problem (Model, get_inputs): found without an entry")
        return
    language = extension_language(module.source)
    if language is None or is_test_file(rel) or is_benchmark_file(rel):
        return
    vendor = vendor_of(rel)
    if vendor is not None and vendor_target(vendor) is None:
        state.skip(vendor, rel)
    elif rel in state.managed:
        state.notes.append(f"# {rel}: already in {next(iter(state.managed[rel].values()))}")
    elif defines(module.source, "ModelNew"):
        state.notes.append(f"# {rel}: a KernelBench candidate (ModelNew): `kforge-bot check PROBLEM --candidate {rel}`")
    else:
        name = state.names.take(module, None, state.library, several=False)
        state.entries.append(extension_entry(rel, name, module, language))


def _kernel_notes(state: _State, graph: CallGraph, orphans: dict[Node, list[Node]]) -> None:
    """Kernels that got no entry: launched only from private code, or by nothing a static reading sees."""
    def generic(rel: str) -> bool:
        return vendor_of(rel) is None and not is_test_file(rel) and not is_benchmark_file(rel)

    for (rel, symbol), private in sorted(orphans.items()):
        if generic(rel):
            via = f" (reached from {', '.join(f'{r}:{s}' for r, s in private[:3])})" if private else ""
            state.notes.append(f"# {rel}:{symbol}: a Triton kernel no public function launches{via}; no entry")
            state.counts["kernels_without_public_launcher"] += 1
    for key, kernel in sorted(graph.kernels.items()):
        if not graph.users.get(key) and generic(key[0]):
            state.notes.append(f"# {key[0]}:{kernel.name}: a Triton kernel nothing in the repository launches; "
                               "no entry")
            state.counts["kernels_never_launched"] += 1


def _helpers(library: Library, graph: CallGraph, launchers: list[Launcher], kernel_files: set[str]) -> set[Node]:
    """Public functions that reach no kernel but sit beside the kernels or are called by their launchers
    (`calculate_settings`, `is_hip`): the ones a file-by-file reading would have taken for entries."""
    launcher_keys = {(la.module.rel, la.symbol) for la in launchers}
    near = {(rel, name) for rel in kernel_files for name in library.by_rel[rel].defs}
    near |= {used for used, users in graph.users.items() if users & launcher_keys}
    return {node for node in near if graph.kinds.get(node) == "function" and not node[1].startswith("_")
            and node not in launcher_keys and node[1] not in REFERENCE_NAMES + INPUT_NAMES
            and not is_test_file(node[0]) and not is_benchmark_file(node[0])}


def _pair_backward(forward: list[Launcher], backward: list[Launcher]) -> dict[str, list[str]]:
    """Each backward launcher goes with the forward launcher of the same stem (`rms_norm_backward` with
    `rms_norm_forward`), else with the module's only forward launcher, else with the first."""
    stem = lambda name: re.sub(r"_?(forward|backward|fwd|bwd|grad)_?", "", name)  # noqa: E731
    pairs: dict[str, list[str]] = {}
    for b in backward:
        match = next((f for f in forward if stem(f.symbol) == stem(b.symbol)), forward[0])
        pairs.setdefault(match.symbol, []).append(b.symbol)
    return pairs


def _autograd_user(state: _State, launcher: Launcher) -> Launcher | None:
    """A public autograd.Function of the launcher's module that calls it with the same leading parameters: an
    entry of its own checks the backward (its `.apply` takes the forward's inputs)."""
    module = launcher.module
    forward = parameters(module.defs[launcher.symbol])
    for symbol, node in module.defs.items():
        if symbol.startswith("_") or not isinstance(node, ast.ClassDef) or \
                not any(ast.unparse(base).split(".")[-1] == "Function" for base in node.bases):
            continue
        calls = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        params = parameters(node)
        if launcher.symbol in calls and forward and params[:len(forward)] == forward:
            return Launcher(module, symbol, "autograd", launcher.kernels)
    return None


def _triton_targets(library: Library) -> list[str]:
    """A generic Triton kernel's targets: cuda, and xpu only where the library has an Intel backend of its own."""
    intel = any(vendor_of(rel) == "intel" for rel in library.by_rel)
    return ["cuda", "xpu"] if intel else ["cuda"]


def _exported(library: Library) -> set[Node]:
    """The (file, symbol) pairs a package's `__init__.py` re-exports: the library's public names."""
    found: set[Node] = set()
    for module in library.modules():
        if not module.is_package or is_test_file(module.rel):
            continue
        for local in module.imports:
            ref = library.resolve(module, local)
            if ref is not None and ref.symbol is not None:
                found.add((ref.module.rel, ref.symbol))
    return found


def _prefer_exported(library: Library, graph: CallGraph, launchers: list[Launcher]) -> list[Launcher]:
    """A launcher its package does not export, called by one in its module that is exported (`general_mm` under
    `mm`), gives way to that one: an entry names what users call."""
    exported = _exported(library)
    if not exported:
        return launchers
    by_key = {(la.module.rel, la.symbol): la for la in launchers}
    kept: dict[Node, Launcher] = {}
    for launcher in launchers:
        key = (launcher.module.rel, launcher.symbol)
        callers = sorted(u for u in graph.users.get(key, ()) if u[0] == key[0] and u in exported
                         and graph.kinds.get(u) in ("function", "module")) if key not in exported else []
        if not callers:
            kept.setdefault(key, launcher)
            continue
        owner = kept.get(callers[0]) or by_key.get(callers[0]) or Launcher(launcher.module, callers[0][1],
                                                                            graph.kinds[callers[0]])
        kept[callers[0]] = owner
        owner.kernels.extend(k for k in launcher.kernels if k not in owner.kernels)
    return sorted(kept.values(), key=lambda la: (la.module.rel, la.module.defs[la.symbol].lineno))



class _Names:
    """Entry names that say where the kernel lives: its module's dotted path without the library's own
    package (`ops.rms_norm`), with the launcher when a module has several; never a numeric suffix."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def take(self, module: Module, symbol: str | None, library: Library, *, several: bool) -> str:
        parts = module.name.split(".")
        top = library.by_name.get(parts[0])
        if len(parts) > 1 and top and top[0].is_package:
            parts = parts[1:]
        base = ".".join(parts)
        options = [f"{base}.{symbol}" if several and symbol else base]
        if symbol:
            options.append(f"{base}.{symbol}")
        full = module.rel.removesuffix(".py").replace("/", ".")
        options += [full, f"{full}.{symbol}" if symbol else full]
        # Past the 64 characters a kernel name may have: the module's last parts, then the launcher alone.
        tail = ".".join(parts[-2:])
        options += [f"{tail}.{symbol}" if symbol else tail, symbol or parts[-1], f"{parts[-1]}.{symbol}"[-64:]]
        for option in options:
            if reader.is_safe_name(option) and option not in self.taken:
                self.taken.add(option)
                return option
        raise KforgeError(f"two entries would both be named {options[-1]!r}", path=module.rel)

