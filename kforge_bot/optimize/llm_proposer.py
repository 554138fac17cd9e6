"""The KForge generator and analyst as the loop's proposer, talking to an OpenAI-compatible endpoint.

Every exchange with the model is reported to the loop as it happens (kforge_bot.optimize.proposer): the prompt
before the request, then the reply (or the endpoint's failure), then what came of it (the analyst's advice)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from kforge_bot.agents import analyst, generator
from kforge_bot.agents.errors import MalformedReply, Terminating
from kforge_bot.agents.llm import LLMClient, Reply, Usage
from kforge_bot.agents.reply_parser import extract_source
from kforge_bot.optimize.proposer import LLM, Event, Proposal, Proposer, RunView, Steps
from kforge_bot.optimize.record import IterationRecord
from kforge_bot.spec import KernelSpec


class LLMProposer(Proposer):
    """The KForge generator and analyst, talking to an OpenAI-compatible endpoint."""

    mode = LLM

    def __init__(self, client: LLMClient, spec: KernelSpec, target_kind: str, *,
                 references: Sequence[dict[str, Any]] = (), models: Sequence[str] = ()) -> None:
        self.client = client
        self.spec = spec
        self.target_kind = target_kind
        self.references = list(references)
        self.models = list(models)
        self.contract = generator.contract_from_spec(spec)
        generator.kernel_language(spec.language, target_kind)  # no prompt for this language: fail before spending

    def describe(self) -> dict[str, Any]:
        return {"generator": "LLM", "endpoint": self.client.endpoint.describe(), "model": self.client.endpoint.model,
                "references": [r.get("note") or r.get("file") or r.get("target") for r in self.references]}

    def prepare(self) -> Steps[None]:
        """Settle the model before minutes of evaluation: with no model named this asks the endpoint for its
        models (GET /models), so a wrong URL or key ends the run at once."""
        try:
            self.client.resolve_model()
        except Terminating as exc:
            yield Event("llm_error", {"iteration": 0, "agent": "models", "kind": type(exc).__name__,
                                      "message": str(exc)})
            raise

    def start(self, view: RunView) -> Steps[None]:
        record = view.record
        if record.usage:
            self.client.usage = Usage.from_dict(record.usage)  # resume: the token budget counts what was spent
        subject = record.best.iteration if record.best else 0
        if record.analysed_for != subject:
            yield from self._analyse(subject, view)

    def propose(self, iteration: int, view: RunView) -> Steps[Proposal]:
        best = view.record.best
        source, _ = yield from self._write(iteration, view, view.best_source(), best.speedup if best else None)
        return Proposal(source=source)

    def observe(self, it: IterationRecord, view: RunView) -> Steps[None]:
        if it.accepted:
            yield from self._analyse(it.iteration, view)

    # -- parallel rounds ------------------------------------------------------------------------

    def propose_for(self, iteration: int, slot: int, taken: Sequence[dict[str, int]],
                    view: RunView) -> Steps[Proposal | None]:
        """One of the round's samples: the models take turns (by iteration), the parents are the beam's
        members in turn (the kernel as written while there is no correct candidate)."""
        parents: list[IterationRecord | None] = list(view.record.beam(view.beam)) or [None]
        parent = parents[slot % len(parents)]
        model = self.models[(iteration - 1) % len(self.models)] if self.models else None
        # The sample's model for this request only: the analyst keeps the run's own model.
        source, reply = yield from self._write(iteration, view, view.source_of(parent.iteration if parent else 0),
                                               parent.speedup if parent is not None else None, model=model)
        return Proposal(source=source, parent=parent.iteration if parent is not None else 0,
                        model=model or reply.model)

    def observe_round(self, its: Sequence[IterationRecord], view: RunView) -> Steps[None]:
        """The analyst reads the round's best accepted candidate once, with every result of the round in its
        list of what was tried."""
        accepted = [it for it in its if it.accepted]
        if accepted:
            yield from self._analyse(max(accepted, key=lambda it: it.speedup or 0.0).iteration, view)

    # -- the exchanges --------------------------------------------------------------------------

    def _write(self, iteration: int, view: RunView, current_source: str, best_speedup: float | None,
               model: str | None = None) -> Steps[tuple[str, Reply]]:
        """Ask the generator for a new version of `current_source`: (the kernel it wrote, its reply)."""
        record = view.record
        messages = generator.build_messages(
            language=self.spec.language, target_kind=self.target_kind, hardware=view.hardware_text,
            contract=self.contract, current_source=current_source, history=record.history,
            recommendations=record.recommendations, references=self.references, best_speedup=best_speedup)
        reply = yield from self._chat("generator", iteration, messages, model=model)
        try:
            # An entry in a launcher elsewhere is not this file's to define (spec.entry_file).
            entry = None if self.spec.entry_file else self.spec.entry
            source = extract_source(reply.text, self.spec.language, entry, filename=self.spec.kernel_file,
                                    truncated=reply.truncated)
        except MalformedReply as exc:
            exc.reply = reply.text  # type: ignore[attr-defined]  # for the history entry's excerpt
            raise
        return source, reply

    def _analyse(self, iteration: int, view: RunView) -> Steps[None]:
        """Ask the analyst about the profile of `iteration` (0: the kernel as written)."""
        record = view.record
        speedup = record.best.speedup if (record.best and iteration) else None
        messages = analyst.build_messages(
            digest=view.digest(iteration), hardware=view.hardware_text, contract=self.contract,
            source=view.source_of(iteration), language=self.spec.language,
            tried=record.tried(max(12, 2 * view.parallel)),
            speedup=speedup)
        reply = yield from self._chat("analyst", iteration, messages)
        try:
            items = analyst.parse_recommendations(reply.text)
        except MalformedReply as exc:
            # Advice is optional: keep the previous advice, spend no iteration.
            yield Event("malformed", {"iteration": iteration, "agent": "analyst", "feedback": exc.feedback})
            return
        yield Event("recommendations", {"for_iteration": iteration, "items": items})

    def _chat(self, agent: str, iteration: int, messages: list[dict[str, str]],
              model: str | None = None) -> Steps[Reply]:
        yield Event("prompt", {"iteration": iteration, "agent": agent, "messages": messages})
        started = time.monotonic()
        try:
            reply = self.client.chat(messages, model=model)
        except Terminating as exc:
            yield Event("llm_error", {"iteration": iteration, "agent": agent, "kind": type(exc).__name__,
                                      "message": str(exc)})
            raise
        except MalformedReply:
            yield Event("reply", {"iteration": iteration, "agent": agent, "text": "", "prompt_tokens": 0,
                                  "completion_tokens": 0, "usage": self.client.usage.to_dict(),
                                  "llm_s": round(time.monotonic() - started, 3)})
            raise
        yield Event("reply", {"iteration": iteration, "agent": agent, "text": reply.text, "model": reply.model,
                              "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                              "attempts": reply.attempts, "finish_reason": reply.finish_reason,
                              "usage_estimated": reply.usage_estimated, "usage": self.client.usage.to_dict(),
                              "llm_s": round(time.monotonic() - started, 3)})
        return reply
