"""`kforge-bot init --draft`: for a launcher the tests gave no reference or inputs, ask the LLM endpoint for
them (kforge_bot.agents.drafter) and run what it wrote against the kernel, in a worker (sandboxed where the
machine can), before proposing it. The reply is untrusted: the bot only parses it; it runs in the worker."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from kforge_bot.agents import drafter
from kforge_bot.agents.llm import LLMClient
from kforge_bot.errors import LLMUnavailable, MalformedReply
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.init.scan.from_tests import TestEvidence
from kforge_bot.init.scan.launchers import Launcher
from kforge_bot.kernelspec import Implementation, KernelSpec


@dataclass
class DraftOutcome:
    accepted: bool
    note: str  # what was checked and how it went
    file: str | None = None  # repository-relative path of the drafted module (accepted only)
    source: str | None = None
    shapes: list[dict[str, object]] | None = None


class Drafter:
    """Drafts and checks one launcher's reference and inputs at a time."""

    def __init__(self, repo: Path, client: LLMClient, target: str, settings: EvalSettings, folder: str,
                 library_modules: frozenset[str], attempts: int = 2) -> None:
        self.library_modules = library_modules
        self.repo, self.client, self.target, self.attempts, self.folder = repo, client, target, attempts, folder
        self.settings = settings  # a correctness check (Policy.eval_settings)
        self.model = client.resolve_model()

    def __call__(self, name: str, slug: str, launcher: Launcher, found: TestEvidence | None) -> DraftOutcome:
        definition = launcher.module.defs[launcher.symbol]
        if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return DraftOutcome(False, "not drafted: the launcher is a class")
        parameters = [a.arg for a in (*definition.args.posonlyargs, *definition.args.args)]
        returns_several = any(isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple)
                              for n in ast.walk(definition))
        kernels = [text for k in launcher.kernels for text in k.sources()]
        messages = drafter.build_messages(launcher.symbol, launcher.module.rel,
                                          ast.get_source_segment(launcher.module.source, definition) or "",
                                          kernels, parameters, returns_several, found.notes if found else [])
        relative = f"{self.folder}/{slug}.py"
        last = "no reply"
        for _ in range(self.attempts):
            try:
                reply = self.client.chat(messages)
            except LLMUnavailable as exc:
                return DraftOutcome(False, f"not drafted: the LLM endpoint failed ({exc})")
            try:
                draft = drafter.parse_reply(reply.text, truncated=reply.truncated, library_modules=self.library_modules)
            except MalformedReply as exc:
                last = f"the reply was malformed ({exc})"
                messages = [*messages, {"role": "assistant", "content": reply.text},
                            {"role": "user", "content": f"{exc}. Send the whole module again."}]
                continue
            verdict, reason = self._check(name, launcher, draft, relative)
            if verdict == "pass":
                shown = ", ".join(str(s) for s in draft.shapes)
                return DraftOutcome(True, f"drafted by {self.model}; run against the kernel on {self.target} at "
                                          f"{shown}: outputs match (shapes, dtypes, values)",
                                    relative, draft.source, draft.shapes)
            last = f"the draft was run against the kernel on {self.target}: {verdict} ({reason})"
            messages = [*messages, {"role": "assistant", "content": reply.text},
                        {"role": "user", "content": f"Run against the kernel: {verdict}: {reason}. Fix the module "
                                                    "and send all of it again."}]
        return DraftOutcome(False, f"not proposed: {last}")

    def _check(self, name: str, launcher: Launcher, draft: drafter.Draft, relative: str) -> tuple[str, str]:
        root = str(self.repo)
        kernel = Implementation.from_file(self.repo / launcher.module.rel, launcher.symbol, root=self.repo)
        drafted = Implementation(source=draft.source, symbol=drafter.REFERENCE, filename=Path(relative).name, root=root)
        spec = KernelSpec(name=name, format="manifest", root=root, kernel_file=launcher.module.rel,
                          entry=launcher.symbol, reference=drafted, baseline=kernel,
                          inputs_symbol=drafter.INPUTS, inputs_source=drafted, shape_sets=tuple(draft.shapes),
                          targets=(self.target,), language="triton", seeds=1)
        result = evaluate(spec, kernel, self.target, self.settings)
        return result.verdict, result.reason
