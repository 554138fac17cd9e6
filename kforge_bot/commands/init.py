"""`kforge-bot init [REPO]`: propose a kforge.yaml for an existing repository.

It reads (never imports) the repository's Python files (kforge_bot.libscan) and proposes an entry for each
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

import click
import yaml

from kforge_bot.commands import examples, target_option
from kforge_bot.config import reader
from kforge_bot.errors import KforgeError
from kforge_bot.libscan.from_tests import TestEvidence, read_tests
from kforge_bot.libscan.launchers import CallGraph, Launcher, Node, is_benchmark_file, is_test_file
from kforge_bot.libscan.modules import Library, Module, dotted_name
from kforge_bot.libscan.vendors import vendor_of, vendor_target
from kforge_bot.spec import MANIFEST_NAME, defines, is_kernelbench_source
from kforge_bot.targets import choose_target

SKIP_DIRS = {".git", ".venv", "venv", "env", "node_modules", "build", "dist", "site-packages", "__pycache__",
             ".tox", ".mypy_cache", ".pytest_cache", ".kforge-cache"}
REFERENCE_NAMES = ("reference", "ref", "torch_reference", "reference_impl")
INPUT_NAMES = ("make_inputs", "get_inputs", "inputs")
REFERENCES_MODULE = "kforge_references.py"  # where init writes the references and inputs it read from tests
DRAFTS_FOLDER = "kforge_drafts"  # where `--draft` writes each checked draft, one module per kernel
TRITON_TARGETS = ["cuda", "xpu"]


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
def init(repo: Path, write_file: bool, draft: bool, draft_limit: int, target: str, isolation: str | None) -> None:
    """Propose a kforge.yaml: an entry per public launcher of a Triton kernel or torch-extension file."""
    if not repo.is_dir():
        raise KforgeError("not a directory", path=repo, hint="give the repository's root")
    repo = repo.resolve()
    drafter = _drafter(repo, target, isolation) if draft else None
    proposal = propose_library(repo, drafter, draft_limit)
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
    from kforge_bot.commands.init_draft import Drafter
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


def propose_library(repo: Path, drafter: Callable[..., Any] | None = None, draft_limit: int = 0) -> Proposal:
    """The proposed manifest for the repository at `repo`; `drafter` (init --draft) is asked for up to
    `draft_limit` launchers that neither their file nor the tests give a reference and inputs."""
    files = sorted(_python_files(repo))
    library = Library.read(repo, files)
    graph = CallGraph.build(library)
    launchers, orphans = graph.launchers()
    kernel_files = {k[0] for k in graph.kernels} | {la.module.rel for la in launchers}
    state = _State(library, _already_managed(repo), Counter())
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
    notes = state.notes + [
        f"# skipped {len(where)} launcher(s) in {vendor}'s backend folders (no kforge target runs them): "
        + ", ".join(where[:3]) + (f", ... ({len(where) - 3} more)" if len(where) > 3 else "")
        for vendor, where in sorted(state.skipped.items())]
    state.counts["entries"] = len(state.entries)
    module_text = _references_module(state.references) if state.references else None
    return Proposal("\n".join(head + state.entries + notes) + "\n", module_text, len(state.entries), state.counts,
                    state.drafts)


@dataclass
class _State:
    """What one proposal collects as it goes."""

    library: Library
    managed: dict[str, dict[str, str]]
    counts: Counter[str]
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
        text, generated = _launcher_entry(name, launcher, pairs.get(launcher.symbol, []), found, state.counts, draft)
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
        for option in options:
            if option not in self.taken:
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
                    counts: Counter[str], draft: Any = None) -> tuple[str, list[tuple[str, list[str]]]]:
    module = launcher.module
    rel = module.rel
    kernels = ", ".join(k.name if k.module is module else f"{k.name} ({k.module.rel})" for k in launcher.kernels)
    autotuned = [k.name for k in launcher.kernels if k.autotuned]
    what = f"{launcher.symbol} launches {kernels}" + (f"; autotuned: {', '.join(autotuned)}" if autotuned else "")
    lines = [f"  {name}:  # {what}", f"    file: {rel}"]
    elsewhere = sorted({k.module.rel for k in launcher.kernels if k.module is not module})
    if elsewhere:
        lines.append(f"    # TODO: the kernels live in {', '.join(elsewhere)}; optimize rewrites only `file:`. Once the "
                     f"manifest lets the entry live in another file: file: {elsewhere[0]}, entry: {rel}:{launcher.symbol}")
    lines.append(f"    entry: {launcher.symbol}" + ("  # an nn.Module: give its constructor's arguments in init:"
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
        more = f", the first {len(found.shapes)} of {found.shapes_total}" if found.shapes_total > len(found.shapes) else ""
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
    if _returns_tuple(module.defs[launcher.symbol]):
        which = (f" ({found.test} compares output {found.output_index})"
                 if found is not None and found.output_index is not None else "")
        select = found.output_index if found is not None and found.output_index is not None else "INDEX_OR_NAME"
        lines.append(f"    # TODO: the launcher returns several values{which}; once the manifest has `outputs:`, "
                     f"outputs: {select} (until then, a wrapper that returns it)")
    if backward:
        lines.append(f"    # TODO: backward launcher(s) {', '.join(backward)}: declare once the manifest has `backward:`")
    root = "/".join(rel.split("/")[:len(rel.split("/")) - len(module.name.split(".")) - (module.is_package)])
    if root:
        lines.append(f"    # TODO: {rel} imports as `{module.name}`; once the manifest has `import_roots:`, "
                     f"import_roots: [{root}]")
    target = vendor_target(_vendor(launcher) or "") or None
    lines.append(f"    targets: [{target}]" if target else f"    targets: [{', '.join(TRITON_TARGETS)}]")
    lines.append("    language: triton")
    return "\n".join(lines), generated


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
                path = (manifest.parent / entry["file"]).resolve()
                if path.is_relative_to(repo):
                    found.setdefault(path.relative_to(repo).as_posix(), {})[str(entry.get("entry"))] = \
                        manifest.relative_to(repo).as_posix()
    return found


def _python_files(repo: Path):
    for path in repo.rglob("*.py"):
        if not any(part in SKIP_DIRS or part.startswith(".") for part in path.relative_to(repo).parts[:-1]):
            yield path


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
