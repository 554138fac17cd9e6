"""The KForge generator and analyst as the loop's proposer, talking to an OpenAI-compatible endpoint."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kforge_bot.agents import analyst, generator
from kforge_bot.agents.errors import MalformedReply, Terminating
from kforge_bot.agents.reply_parser import extract_source
from kforge_bot.optimize.digest import profile_digest
from kforge_bot.optimize.proposer import LLM, Proposal
from kforge_bot.optimize.record import IterationRecord
from kforge_bot.spec import KernelSpec

if TYPE_CHECKING:  # the loop imports the proposers' protocol
    from kforge_bot.optimize.loop import Loop


class LLMProposer:
    """The KForge generator and analyst, talking to an OpenAI-compatible endpoint."""

    mode = LLM

    def __init__(self, client: Any, spec: KernelSpec, target_kind: str, *,
                 references: Sequence[dict[str, Any]] = (), models: Sequence[str] = ()) -> None:
        self.client = client  # kforge_bot.agents.llm.LLMClient
        self.spec = spec
        self.target_kind = target_kind
        self.references = list(references)
        self.models = list(models)
        self.contract = generator.contract_from_spec(spec)
        generator.kernel_language(spec.language, target_kind)  # no prompt for this language: fail before spending
        self.loop: Loop | None = None

    def bind(self, loop: Loop) -> None:
        self.loop = loop

    def prepare(self) -> None:
        """Settle the model before minutes of evaluation: with no model named this asks the endpoint for its
        models (GET /models), so a wrong URL or key ends the run at once."""
        assert self.loop is not None
        try:
            self.client.resolve_model()
        except Terminating as exc:
            self.loop.trajectory.append("llm_error", iteration=0, agent="models", kind=type(exc).__name__,
                                        message=str(exc))
            raise

    def describe(self) -> dict[str, Any]:
        return {"generator": "LLM", "endpoint": self.client.endpoint.describe(), "model": self.client.endpoint.model,
                "references": [r.get("note") or r.get("file") or r.get("target") for r in self.references]}

    def start(self) -> None:
        assert self.loop is not None
        record = self.loop.record
        if record.usage:
            from kforge_bot.agents.llm import Usage

            self.client.usage = Usage.from_dict(record.usage)  # resume: the token budget counts what was spent
        subject = record.best.iteration if record.best else 0
        if record.analysed_for != subject:
            self.analyse(subject)

    def propose(self, iteration: int) -> Proposal:
        assert self.loop is not None
        record = self.loop.record
        best = record.best
        messages = generator.build_messages(
            language=self.spec.language, target_kind=self.target_kind, hardware=self.loop.hardware_text,
            contract=self.contract, current_source=self.loop.best_source(), history=record.history,
            recommendations=record.recommendations, references=self.references,
            best_speedup=best.speedup if best else None)
        reply = self._chat("generator", iteration, messages)
        try:
            source = extract_source(reply.text, self.spec.language, self.spec.entry,
                                              filename=self.spec.kernel_file, truncated=reply.truncated)
        except MalformedReply as exc:
            exc.reply = reply.text  # type: ignore[attr-defined]  # for the history entry's excerpt
            raise
        return Proposal(source=source)

    def observe(self, it: IterationRecord) -> None:
        if it.accepted:
            self.analyse(it.iteration)

    # -- parallel rounds ------------------------------------------------------------------------

    def propose_for(self, iteration: int, slot: int, round_taken: list[Any]) -> Proposal | None:
        """One of the round's samples: the models take turns (by iteration), the parents are the beam's
        members in turn (the kernel as written while there is no correct candidate)."""
        assert self.loop is not None
        record = self.loop.record
        parents: list[IterationRecord | None] = list(record.beam(self.loop.beam)) or [None]
        parent = parents[slot % len(parents)]
        model = self.models[(iteration - 1) % len(self.models)] if self.models else None
        source_now = self.loop.trajectory.read_source(parent.file) if parent is not None and parent.file \
            else self.spec.baseline.source
        messages = generator.build_messages(
            language=self.spec.language, target_kind=self.target_kind, hardware=self.loop.hardware_text,
            contract=self.contract, current_source=source_now, history=record.history,
            recommendations=record.recommendations, references=self.references,
            best_speedup=parent.speedup if parent is not None else None)
        # The sample's model for this request only: the analyst keeps the run's own model.
        reply = self._chat("generator", iteration, messages, model=model)
        try:
            source = extract_source(reply.text, self.spec.language, self.spec.entry,
                                              filename=self.spec.kernel_file, truncated=reply.truncated)
        except MalformedReply as exc:
            exc.reply = reply.text  # type: ignore[attr-defined]
            raise
        return Proposal(source=source, parent=parent.iteration if parent is not None else 0,
                        model=model or getattr(reply, "model", None))

    def observe_round(self, its: list[IterationRecord]) -> None:
        """The analyst reads the round's best accepted candidate once, with every result of the round in its
        list of what was tried."""
        accepted = [it for it in its if it.accepted]
        if accepted:
            self.analyse(max(accepted, key=lambda it: it.speedup or 0.0).iteration)

    def analyse(self, iteration: int) -> None:
        """Ask the analyst about the profile of `iteration` (0: the kernel as written)."""
        assert self.loop is not None
        record = self.loop.record
        speedup = record.best.speedup if (record.best and iteration) else None
        messages = analyst.build_messages(
            digest=profile_digest(self.loop.record, iteration), hardware=self.loop.hardware_text, contract=self.contract,
            source=self.loop.source_of(iteration), language=self.spec.language,
            tried=record.tried(max(12, 2 * self.loop.parallel)),
            speedup=speedup)
        reply = self._chat("analyst", iteration, messages)
        try:
            items = analyst.parse_recommendations(reply.text)
        except MalformedReply as exc:
            # Advice is optional: keep the previous advice, spend no iteration.
            self.loop.trajectory.append("malformed", iteration=iteration, agent="analyst", feedback=exc.feedback)
            return
        self.loop.trajectory.append("recommendations", for_iteration=iteration, items=items)

    def _chat(self, agent: str, iteration: int, messages: list[dict[str, str]], model: str | None = None) -> Any:
        assert self.loop is not None
        trajectory = self.loop.trajectory
        trajectory.append("prompt", iteration=iteration, agent=agent, messages=messages)
        started = time.monotonic()
        try:
            reply = self.client.chat(messages, model=model)
        except Terminating as exc:
            trajectory.append("llm_error", iteration=iteration, agent=agent, kind=type(exc).__name__, message=str(exc))
            raise
        except MalformedReply:
            trajectory.append("reply", iteration=iteration, agent=agent, text="", prompt_tokens=0, completion_tokens=0,
                              usage=self.client.usage.to_dict(), llm_s=round(time.monotonic() - started, 3))
            raise
        trajectory.append("reply", iteration=iteration, agent=agent, text=reply.text, model=reply.model,
                          prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                          attempts=reply.attempts, finish_reason=reply.finish_reason,
                          usage_estimated=reply.usage_estimated, usage=self.client.usage.to_dict(),
                          llm_s=round(time.monotonic() - started, 3))
        return reply

