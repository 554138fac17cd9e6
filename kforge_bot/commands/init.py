"""`kforge-bot init [REPO]`: propose a kforge.yaml for an existing repository.

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
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml

from kforge_bot.commands import examples, target_option
from kforge_bot.config import reader
from kforge_bot.errors import KforgeError
from kforge_bot.init.scan.device_queries import import_time_queries
from kforge_bot.init.scan.from_tests import TestEvidence, read_tests
from kforge_bot.init.scan.launchers import CallGraph, Launcher, Node, is_benchmark_file, is_test_file
from kforge_bot.init.scan.modules import Library, Module, dotted_name
from kforge_bot.init.scan.vendors import vendor_of, vendor_target
from kforge_bot.spec import MANIFEST_NAME, MAX_MANIFEST_KERNELS, defines, file_reference, is_kernelbench_source
from kforge_bot.spec.dependencies import NO_KERNEL_FOLDERS
from kforge_bot.targets import choose_target

# A library's scan also passes over folders that are environments by their usual names (never kernel sources).
SKIP_DIRS = NO_KERNEL_FOLDERS | {"env", "site-packages"}
# Folders that hold no library kernels (an application, docs, vendored third-party code): never parsed.
NOT_LIBRARY_DIRS = {"apps", "app", "docs", "doc", "third_party", "thirdparty", "3rdparty", "vendored", "_vendor",
                    "external", "extern", "deps", "notebooks", "website", "site"}
MAX_SCANNED_BYTES = 1 << 20  # a larger .py file is generated or data, not a kernel library's source
REFERENCE_NAMES = ("reference", "ref", "torch_reference", "reference_impl")
INPUT_NAMES = ("make_inputs", "get_inputs", "inputs")
REFERENCES_MODULE = "kforge_references.py"  # where init writes the references and inputs it read from tests
DRAFTS_FOLDER = "kforge_drafts"  # where `--draft` writes each checked draft, one module per kernel


@dataclass
class Proposal:
    """The proposed manifest, the references module it names (None: nothing generated), and what was found."""

    manifest: str
    references: str | None
    entries: int
    counts: Counter[str] = field(default_factory=Counter)
    drafts: dict[str, str] = field(default_factory=dict)  # repository-relative path -> drafted module (checked)


@click.command("init", epilog=examples(
    "kforge-bot init                 # print a proposed kforge.yaml for this repository",
    "kforge-bot init ../repo --write # write it as ../repo/kforge.yaml (never over an existing one)",
    "kforge-bot init --draft --target cuda  # with OPENAI_BASE_URL set: LLM drafts, each run on cuda first"))
@click.argument("repo", type=click.Path(path_type=Path, file_okay=False), default=".")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, file_okay=False))
@click.option("--write", "write_file", is_flag=True,
              help=f"Write REPO/kforge.yaml (and REPO/{REFERENCES_MODULE} when tests gave references, REPO/"
                   f"{DRAFTS_FOLDER}/ for checked drafts) instead of printing them.")
@click.option("--draft", is_flag=True,
              help="Ask the LLM endpoint (OPENAI_BASE_URL / OPENAI_API_KEY) for the reference and inputs no file or "
                   "test gives, and propose each only after it ran against the kernel on --target.")
@click.option("--draft-limit", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Launchers to draft for, at most.")
@target_option("Where --draft runs the drafts against the kernel:", default="auto")
@click.option("--isolation", type=click.Choice(["required", "preferred", "off"]), default=None,
              help="The OS sandbox for the drafts' runs (default: the policy's, as for `check`).")
def init(repo: Path, paths: tuple[Path, ...], write_file: bool, draft: bool, draft_limit: int, target: str,
         isolation: str | None) -> None:
    """Propose a kforge.yaml: an entry per public launcher of a Triton kernel or torch-extension file. PATHS
    (folders below REPO) limit the scan to the library's own folders; its tests are read wherever they are."""
    if not repo.is_dir():
        raise KforgeError("not a directory", path=repo, hint="give the repository's root")
    repo = repo.resolve()
    scan = tuple(_scan_folder(repo, path) for path in paths)
    drafter = _drafter(repo, target, isolation) if draft else None
    proposal = propose_library(repo, drafter, draft_limit, scan)
    if not write_file:
        click.echo(proposal.manifest, nl=False)
        extra = ([(REFERENCES_MODULE, proposal.references)] if proposal.references is not None else []) + \
            sorted(proposal.drafts.items())
        for name, text in extra:
            click.echo(f"# --- {name}, written beside kforge.yaml by --write ---")
            click.echo("".join(f"#   {line}\n" for line in text.splitlines()), nl=False)
        return
    if not proposal.entries:
        raise KforgeError("no new kernel files to propose an entry for", path=repo,
                          hint="run `kforge-bot init` without --write to see what was found")
    files = {MANIFEST_NAME: proposal.manifest, **proposal.drafts}
    if proposal.references is not None:
        files[REFERENCES_MODULE] = proposal.references
    for rel in files:
        if (repo / rel).exists():
            raise KforgeError("already exists; init never overwrites it", path=repo / rel,
                              hint="run `kforge-bot init` without --write to see the proposal, and merge it by hand")
    for rel, text in sorted(files.items(), key=lambda item: item[0] == MANIFEST_NAME):  # the manifest last
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    also = "".join(f" and {repo / rel}" for rel in sorted(files) if rel != MANIFEST_NAME)
    click.echo(f"wrote {repo / MANIFEST_NAME}{also}: review what came from tests or drafts, fill in the TODOs, then "
               "run `kforge-bot list` and `kforge-bot check --all`")


def _drafter(repo: Path, target: str, isolation: str | None) -> Callable[..., Any]:
    from kforge_bot.agents.llm import LLMClient, configured, endpoint_from_env
    from kforge_bot.init.draft import Drafter
    from kforge_bot.evaluate.isolation import announcement
    from kforge_bot.config.policy import load_policy

    if not configured():
        raise KforgeError("--draft needs an LLM endpoint", hint="set OPENAI_BASE_URL (and OPENAI_API_KEY if it "
                                                                "needs one), or run init without --draft")
    kind = choose_target(target, here=False).device_kind(("cuda", "xpu", "cpu"))
    # A draft is checked for correctness only, on one seed, sandboxed as `check` would run it.
    settings = load_policy(None).eval_settings("check", seeds=1, measure=False, profile=False,
                                               isolation=isolation, timeout_s=300.0)
    click.echo(announcement(settings.isolation), err=True)
    modules = frozenset(dotted_name(p.relative_to(repo).as_posix()).split(".")[0] for p in _python_files(repo))
    return Drafter(repo, LLMClient(endpoint_from_env()), kind, settings, DRAFTS_FOLDER, modules)


def _scan_folder(repo: Path, path: Path) -> str:
    """A PATH argument as a folder relative to the repository (given relative to it, or to the working folder)."""
    for candidate in (repo / path, path.resolve()):
        if candidate.is_dir() and candidate.resolve().is_relative_to(repo):
            return candidate.resolve().relative_to(repo).as_posix()
    raise KforgeError("not a folder inside the repository", path=path,
                      hint=f"give a folder below {repo}, e.g. the library's package")


def propose_library(repo: Path, drafter: Callable[..., Any] | None = None, draft_limit: int = 0,
                    scan: tuple[str, ...] = ()) -> Proposal:
    """The proposed manifest for the repository at `repo`; `drafter` (init --draft) is asked for up to
    `draft_limit` launchers that neither their file nor the tests give a reference and inputs; `scan` (folders
    relative to `repo`) limits the library to them (tests are read wherever they are)."""
    files = sorted(_library_files(repo, scan))
    library = Library.read(repo, files)
    graph = CallGraph.build(library)
    launchers, orphans = graph.launchers()
    launchers = _prefer_exported(library, graph, launchers)
    kernel_files = {k[0] for k in graph.kernels} | {la.module.rel for la in launchers}
    state = _State(library, _already_managed(repo), Counter(), _triton_targets(library))
    state.counts["kernels"] = len(graph.kernels)
    state.counts["kernels_launched"] = sum(1 for k in graph.kernels if graph.launched(k))
    state.counts["helpers_avoided"] = len(_helpers(library, graph, launchers, kernel_files))

    by_module: dict[str, list[Launcher]] = {}
    for launcher in launchers:
        vendor = _vendor(launcher)
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
    module_text = _references_module(state.references) if state.references else None
    return Proposal("\n".join(head + state.entries + notes) + "\n", module_text, len(state.entries), state.counts,
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
        if drafter is not None and state.counts["drafts_tried"] < draft_limit and _needs_draft(launcher, found):
            state.counts["drafts_tried"] += 1
            draft = drafter(name, re.sub(r"\W", "_", name), launcher, found)
            if draft.accepted:
                state.counts["drafts_accepted"] += 1
                state.drafts[draft.file] = draft.source
        text, generated = _launcher_entry(name, launcher, pairs.get(launcher.symbol, []), found, state.counts, draft,
                                          state.targets)
        state.entries.append(text)
        state.references.extend(generated)
        function = _autograd_user(state, launcher)
        if function is not None:  # its backward, checked through autograd with the forward's inputs
            text, generated = _launcher_entry(f"{name}.autograd", function, [], found, state.counts, None,
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
    language = _extension_language(module.source)
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
        state.entries.append(_extension_entry(rel, name, module, language))


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
            state.notes.append(f"# {key[0]}:{kernel.name}: a Triton kernel nothing in the repository launches; no entry")
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
    forward = _parameters(module.defs[launcher.symbol])
    for symbol, node in module.defs.items():
        if symbol.startswith("_") or not isinstance(node, ast.ClassDef) or \
                not any(ast.unparse(base).split(".")[-1] == "Function" for base in node.bases):
            continue
        calls = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        params = _parameters(node)
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


def _vendor(launcher: Launcher) -> str | None:
    own = vendor_of(launcher.module.rel)
    if own is not None:
        return own
    vendors = {vendor_of(k.module.rel) for k in launcher.kernels}
    return vendors.pop() if len(vendors) == 1 else None


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


def _needs_draft(launcher: Launcher, found: TestEvidence | None) -> bool:
    """Whether neither the launcher's file nor its tests give a reference and inputs."""
    source = launcher.module.source
    own = any(defines(source, n) for n in REFERENCE_NAMES) and any(defines(source, n) for n in INPUT_NAMES)
    from_tests = found is not None and bool(found.reference_code or found.reference_symbol) \
        and found.inputs_code is not None
    return launcher.kind == "function" and not own and not from_tests


def _launcher_entry(name: str, launcher: Launcher, backward: list[str], found: TestEvidence | None,
                    counts: Counter[str], draft: Any = None, triton_targets: list[str] | None = None
                    ) -> tuple[str, list[tuple[str, list[str]]]]:
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
    own_reference = next((n for n in REFERENCE_NAMES if defines(module.source, n)), None)
    own_inputs = next((n for n in INPUT_NAMES if defines(module.source, n)), None)
    generated: list[tuple[str, list[str]]] = []
    slug = re.sub(r"\W", "_", name)
    review = f"  # from {found.test}; review" if found is not None else ""
    drafted = draft is not None and draft.accepted
    if draft is not None:
        lines.append(f"    # draft: {draft.note}; review")
    if own_reference:
        lines.append(f"    reference: {rel}:{own_reference}")
    elif drafted:
        lines.append(f"    reference: {draft.file}:reference  # drafted; review")
    elif found is not None and found.reference_symbol:
        lines.append(f"    reference: {found.test.split('::')[0]}:{found.reference_symbol}{review}")
        counts["references_from_tests"] += 1
    elif found is not None and found.reference_code:
        symbol = f"{slug}_reference"
        generated.append(_function(symbol, found.reference_params, [found.reference_code], found, "reference"))
        lines.append(f"    reference: {REFERENCES_MODULE}:{symbol}{review}")
        counts["references_from_tests"] += 1
    else:
        why = f" ({found.test}: {'; '.join(found.notes)})" if found is not None and found.notes else ""
        lines.append(f"    reference: {rel}:reference  # TODO: write reference(...), the same call in plain PyTorch{why}")
    required: list[str] = []
    if own_inputs:
        lines.append(f"    inputs: {rel}:{own_inputs}")
        required = _required_parameters(module.defs.get(own_inputs))
    elif drafted:
        lines.append(f"    inputs: {draft.file}:make_inputs  # drafted; review")
    elif found is not None and found.inputs_code is not None:
        symbol = f"{slug}_inputs"
        body = [f"if isinstance({p}, str):\n    {p} = getattr(torch, {p})" for p in found.dtype_params]
        generated.append(_function(symbol, found.inputs_params, body + found.inputs_code, found, "inputs"))
        lines.append(f"    inputs: {REFERENCES_MODULE}:{symbol}{review}")
        counts["inputs_from_tests"] += 1
    else:
        lines.append(f"    inputs: {rel}:make_inputs  # TODO: write make_inputs(**shape) returning the call's arguments")
    if drafted and not own_inputs:
        lines.append("    shapes:  # drafted; review")
        lines += [f"      - {_flow(shape)}" for shape in draft.shapes]
    elif not own_inputs and found is not None and found.inputs_code is not None and found.shapes:
        more = f", the largest {len(found.shapes)} of {found.shapes_total}" \
            if found.shapes_total > len(found.shapes) else ""
        lines.append(f"    shapes:  # from {found.test} (pytest.mark.parametrize{more}); review")
        lines += [f"      - {_flow(shape)}" for shape in found.shapes]
        counts["shapes_from_tests"] += 1
    else:
        lines.append("    shapes:")
        lines.append("      - {}  # " + (
            f"TODO: {own_inputs} needs {', '.join(required)}: one mapping per size, e.g. "
            f"{{{', '.join(f'{p}: ...' for p in required)}}}" if required else
            "TODO: keyword arguments for the inputs callable, one mapping per size to check and time"
            if not own_inputs else f"{own_inputs}'s defaults; add a mapping per size to check and time"))
    lines += _returns_lines(launcher, found)
    lines += _backward_lines(launcher, backward)
    root = "/".join(rel.split("/")[:len(rel.split("/")) - len(module.name.split(".")) - (module.is_package)])
    if root:
        lines.append(f"    import_roots: [{root}]  # {rel} imports as `{module.name}`")
    target = vendor_target(_vendor(launcher) or "") or None
    lines.append(f"    targets: [{target or ', '.join(triton_targets or ['cuda'])}]")
    lines.append("    language: triton")
    return "\n".join(lines), generated


def _parameters(node: ast.stmt) -> list[str]:
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
    params = _parameters(node)
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
    names = _parameters(node)
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
    params = _parameters(forward)
    outputs = next((r for r in _returned_names(forward) if len(r) > 1), [])
    args: list[str] = []
    grads = 0
    for name in _parameters(backward):
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


def _references_module(parts: list[tuple[str, list[str]]]) -> str:
    imports = ["import torch", *(line for _, needed in parts for line in needed)]
    functions = [text for text, _ in parts]
    return ('"""References and inputs that `kforge-bot init` read from the repository\'s tests: review each before\n'
            'trusting a verdict on it."""\n\n' + "\n".join(dict.fromkeys(imports)) + "\n\n\n" + "\n\n".join(functions))


def _returns_tuple(node: ast.stmt) -> bool:
    return any(isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple) for n in ast.walk(node))


def _already_managed(repo: Path) -> dict[str, dict[str, str]]:
    """Kernel files the repository's manifests already name, relative to the root -> {entry: manifest}. Only
    the `file` and `entry` keys are read, not through spec.load_manifest: a proposal written by `init --write`
    still holds its TODOs, does not load, and its entries must still count as managed."""
    found: dict[str, dict[str, str]] = {}
    for manifest in repo.rglob(MANIFEST_NAME):
        try:
            kernels = (reader.read_yaml(manifest, repo) or {}).get("kernels") or {}
        except (KforgeError, AttributeError):
            continue
        for entry in kernels.values() if isinstance(kernels, dict) else ():
            if isinstance(entry, dict) and isinstance(entry.get("file"), str):
                file, symbol = entry["file"], str(entry.get("entry"))
                launcher = file_reference(symbol)
                if launcher is not None:  # an entry in a launcher file of its own: that file is what it names
                    file, symbol = launcher
                path = (manifest.parent / file).resolve()
                if path.is_relative_to(repo):
                    found.setdefault(path.relative_to(repo).as_posix(), {})[symbol] = \
                        manifest.relative_to(repo).as_posix()
    return found


def _python_files(repo: Path, scan: tuple[str, ...] = ()):
    """The repository's Python files, less folders that hold no library (and, with `scan`, all but those folders
    and the tests), pruned as the walk goes: an application's tree is never entered."""
    for folder, dirs, files in os.walk(repo):
        rel = Path(folder).relative_to(repo).as_posix()
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and d.lower() not in NOT_LIBRARY_DIRS
                         and not d.startswith(".")
                         and (not scan or _on_the_way(f"{rel}/{d}".removeprefix("./"), scan)))
        inside = not scan or any(f"{rel}/".startswith(f"{s}/") or rel == s for s in scan) or \
            is_test_file(f"{rel}/x.py")
        for name in sorted(files):
            path = Path(folder) / name
            # Above a scanned folder, its packages' __init__.py: they name its modules and say what is exported.
            if not name.endswith(".py") or not (inside or name == "__init__.py"
                                                or is_test_file(path.relative_to(repo).as_posix())):
                continue
            try:
                if path.stat().st_size <= MAX_SCANNED_BYTES:
                    yield path
            except OSError:
                continue


_KERNEL_MARKERS = ("triton.jit", "@triton", "triton.autotune", "load_inline", "cpp_extension", "get_init_inputs")


def _library_files(repo: Path, scan: tuple[str, ...] = ()) -> list[Path]:
    """_python_files, less every top-level folder (tests aside) none of whose files holds a Triton kernel, a torch
    extension or a KernelBench problem (by its text): an application beside the library (a server, a UI's backend,
    which may well name triton in an install script) is read as text, never parsed."""
    by_top: dict[str, list[Path]] = {}
    for path in _python_files(repo, scan):
        parts = path.relative_to(repo).parts
        by_top.setdefault(parts[0] if len(parts) > 1 else "", []).append(path)
    kept: list[Path] = []
    for top, paths in by_top.items():
        if top and not is_test_file(f"{top}/x.py") and not any(_mentions_kernels(p) for p in paths):
            continue
        kept.extend(paths)
    return kept


def _mentions_kernels(path: Path) -> bool:
    try:
        text = reader.read_text(path)
    except (KforgeError, OSError):
        return False
    return any(marker in text for marker in _KERNEL_MARKERS)


def _on_the_way(rel: str, scan: tuple[str, ...]) -> bool:
    """Whether the walk must enter `rel`: a scanned folder, one above it, one below it, or a tests folder."""
    return any(rel == s or s.startswith(f"{rel}/") or rel.startswith(f"{s}/") for s in scan) or \
        is_test_file(f"{rel}/x.py")


def _extension_language(source: str) -> str | None:
    if "load_inline(" in source or re.search(r"cpp_extension\.load\(|from torch\.utils\.cpp_extension import", source):
        return "cuda" if ("__global__" in source or "cuda_sources" in source or ".cu" in source) else "cpp"
    return None


def _extension_entry(rel: str, name: str, module: Module, language: str) -> str:
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
