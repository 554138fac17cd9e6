"""The KForge generator and analyst as the loop's proposer, talking to an OpenAI-compatible endpoint.

Every exchange with the model is reported to the loop in the call's `Exchange` (kforge_bot.optimize.protocols),
in the order it happened: the prompt (stamped when it was sent), then the reply (or the endpoint's failure), then
what came of it (the analyst's advice).

A prompt longer than the model's context window (the server says so: kforge_bot.agents.llm raises
ContextLengthExceeded) is sent again shorter, step by step, until one fits (TRIM_RULE, also in docs/optimize.md):
  generator  1: the last 2 attempts, their messages cut to 1,000 characters, no other targets' code;
             2: the last attempt, cut to 300 characters, only the analyst's top recommendation;
             3: no attempts, no recommendations: the task, the contract and the current best alone.
  analyst    1: the last 4 results of what was tried, no source;  2: the profile alone.
Each step is a `prompt_trimmed` event. When the last step does not fit either, the run stops with one line that
names the sizes and how to give the model a larger window."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kforge_bot.agents import analyst, generator
from kforge_bot.agents.llm import LLMClient, Reply, Usage
from kforge_bot.agents.reply_parser import extract_source
from kforge_bot.errors import ContextLengthExceeded, LoopControl, MalformedReply, Terminating
from kforge_bot.optimize.protocols import LLM, Exchange, Interrupted, Proposal, RunView
from kforge_bot.optimize.record import IterationRecord
from kforge_bot.kernelspec import KernelSpec

# What each step of the rule keeps (see the module docstring); step 0 is the whole prompt.
GENERATOR_TRIMS: tuple[dict[str, Any], ...] = (
    {},
    {"max_history": 2, "max_message_chars": 1000, "references": 0},
    {"max_history": 1, "max_message_chars": 300, "references": 0, "recommendations": 1},
    {"max_history": 0, "references": 0, "recommendations": 0},
)
ANALYST_TRIMS: tuple[dict[str, Any], ...] = ({}, {"tried": 4, "source": False}, {"tried": 0, "source": False})
TRIM_RULE = ("less history (2 attempts, then 1, then none), no other targets' code, fewer recommendations; the "
             "analyst: fewer results of what was tried, no source")


class LLMProposer:
    """The KForge generator and analyst, talking to an OpenAI-compatible endpoint."""

    kind = LLM

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
        endpoint = self.client.endpoint
        return {"generator": "LLM", "endpoint": endpoint.describe(), "endpoint_url": endpoint.url,
                "model": endpoint.model,
                "references": [r.get("note") or r.get("file") or r.get("target") for r in self.references]}

    def prepare(self) -> Exchange:
        """Settle the model before minutes of evaluation: with no model named this asks the endpoint for its
        models (GET /models), so a wrong URL or key ends the run at once."""
        out = Exchange()
        try:
            self.client.resolve_model()
        except Terminating as exc:
            out.report("llm_error", iteration=0, agent="models", kind=type(exc).__name__, message=str(exc))
            out.signal = exc
        return out

    def propose(self, view: RunView) -> Exchange:
        """One of the round's samples: the models take turns (by iteration), the parents are the beam's members
        in turn (the kernel as written while there is no correct candidate). A round of one (no --parallel)
        starts from the current best, with the run's own model."""
        parent: IterationRecord | None
        if view.parallel == 1:
            parent, model = view.record.best, None
        else:
            parents: list[IterationRecord | None] = list(view.record.beam(view.beam)) or [None]
            parent = parents[view.slot % len(parents)]
            model = self.models[(view.iteration - 1) % len(self.models)] if self.models else None
        out = Exchange()
        try:
            # The sample's model for this request only: the analyst keeps the run's own model.
            source, reply = self._write(out, view, view.source_of(parent.iteration if parent else 0),
                                        parent.speedup if parent is not None else None, model=model)
        except LoopControl as signal:
            out.signal = signal
            return out
        out.proposal = Proposal(source=source, parent=parent.iteration if parent is not None else 0,
                                model=model or reply.model)
        return out

    def observe(self, view: RunView, judged: Sequence[IterationRecord]) -> Exchange:
        """Nothing judged yet (the run starts or resumes): the analyst reads the current best's profile unless it
        already has. A round: the analyst reads the round's best accepted candidate once, with every result of
        the round in its list of what was tried."""
        record = view.record
        if not judged:
            if record.usage:
                self.client.usage = Usage.from_dict(record.usage)  # resume: the token budget counts what was spent
            subject: int | None = record.best.iteration if record.best else 0
            subject = None if record.analysed_for == subject else subject
        else:
            accepted = [it for it in judged if it.accepted]
            subject = max(accepted, key=lambda it: it.speedup or 0.0).iteration if accepted else None
        out = Exchange()
        if subject is not None:
            try:
                self._analyse(out, subject, view)
            except LoopControl as signal:
                out.signal = signal
        return out

    # -- the exchanges --------------------------------------------------------------------------

    def _write(self, out: Exchange, view: RunView, current_source: str, best_speedup: float | None,
               model: str | None = None) -> tuple[str, Reply]:
        """Ask the generator for a new version of `current_source`: (the kernel it wrote, its reply)."""
        record = view.record

        def messages(step: int) -> list[dict[str, str]]:
            trim = GENERATOR_TRIMS[step]
            history = record.history if trim.get("max_history", 1) else []
            recommendations = record.recommendations[:trim.get("recommendations", len(record.recommendations))]
            return generator.build_messages(
                language=self.spec.language, target_kind=self.target_kind, hardware=view.hardware_text,
                contract=self.contract, current_source=current_source, history=history,
                recommendations=recommendations, references=self.references if trim.get("references", 1) else (),
                best_speedup=best_speedup, max_history=trim.get("max_history", generator.MAX_HISTORY),
                max_message_chars=trim.get("max_message_chars", generator.MAX_MESSAGE_CHARS))

        reply = self._chat(out, "generator", view.iteration, messages, len(GENERATOR_TRIMS), model=model)
        try:
            # An entry in a launcher elsewhere is not this file's to define (spec.entry_file).
            entry = None if self.spec.entry_file else self.spec.entry
            source = extract_source(reply.text, self.spec.language, entry, filename=self.spec.kernel_file,
                                    truncated=reply.truncated)
        except MalformedReply as exc:
            exc.reply = reply.text  # type: ignore[attr-defined]  # for the history entry's excerpt
            raise
        return source, reply

    def _analyse(self, out: Exchange, iteration: int, view: RunView) -> None:
        """Ask the analyst about the profile of `iteration` (0: the kernel as written)."""
        record = view.record
        speedup = record.best.speedup if (record.best and iteration) else None
        tried = record.tried(max(12, 2 * view.parallel))

        def messages(step: int) -> list[dict[str, str]]:
            trim = ANALYST_TRIMS[step]
            keep = trim.get("tried", len(tried))
            return analyst.build_messages(
                digest=view.digest(iteration), hardware=view.hardware_text, contract=self.contract,
                source=view.source_of(iteration) if trim.get("source", True) else None, language=self.spec.language,
                tried=tried[len(tried) - keep:] if keep else [], speedup=speedup)

        reply = self._chat(out, "analyst", iteration, messages, len(ANALYST_TRIMS), max_tokens=analyst.MAX_REPLY_TOKENS)
        try:
            items = analyst.parse_recommendations(reply.text)
        except MalformedReply as exc:
            # Advice is optional: keep the previous advice, spend no iteration.
            out.report("malformed", iteration=iteration, agent="analyst", feedback=exc.feedback)
            return
        out.report("recommendations", for_iteration=iteration, items=items)

    def _chat(self, out: Exchange, agent: str, iteration: int, messages: Callable[[int], list[dict[str, str]]],
              steps: int, model: str | None = None, max_tokens: int | None = None) -> Reply:
        """One exchange: the whole prompt first, then shorter ones while the server says it does not fit."""
        for step in range(steps):
            prompt = messages(step)
            out.report("prompt", iteration=iteration, agent=agent, messages=prompt,
                       **({"trim_step": step} if step else {}))
            started = time.monotonic()
            try:
                reply = self.client.chat(prompt, model=model, max_tokens=max_tokens)
            except ContextLengthExceeded as exc:
                if step + 1 < steps:
                    out.report("prompt_trimmed", iteration=iteration, agent=agent, step=step + 1,
                               prompt_tokens=exc.prompt_tokens, context_tokens=exc.context_tokens)
                    continue
                stop = ContextLengthExceeded(_too_long(agent, exc), prompt_tokens=exc.prompt_tokens,
                                             context_tokens=exc.context_tokens, attempts=exc.attempts)
                out.report("llm_error", iteration=iteration, agent=agent, kind=type(stop).__name__, message=str(stop))
                raise stop from exc
            except Terminating as exc:
                out.report("llm_error", iteration=iteration, agent=agent, kind=type(exc).__name__, message=str(exc))
                raise
            except KeyboardInterrupt:
                raise Interrupted(out) from None  # the loop still writes the prompt
            except MalformedReply:
                out.report("reply", iteration=iteration, agent=agent, text="", prompt_tokens=0, completion_tokens=0,
                           usage=self.client.usage.to_dict(), llm_s=round(time.monotonic() - started, 3))
                raise
            out.report("reply", iteration=iteration, agent=agent, text=reply.text, model=reply.model,
                       prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                       attempts=reply.attempts, finish_reason=reply.finish_reason,
                       usage_estimated=reply.usage_estimated, usage=self.client.usage.to_dict(),
                       llm_s=round(time.monotonic() - started, 3))
            return reply
        raise AssertionError("unreachable: the last step returns or raises")


def _too_long(agent: str, exc: ContextLengthExceeded) -> str:
    """The one line a user reads when even the shortest prompt does not fit."""
    sizes = ""
    if exc.prompt_tokens and exc.context_tokens:
        sizes = f" ({exc.prompt_tokens:,} tokens; the window holds {exc.context_tokens:,})"
    elif exc.context_tokens:
        sizes = f" (the window holds {exc.context_tokens:,} tokens)"
    return (f"the {agent}'s shortest prompt does not fit the model's context window{sizes}: serve the model with a "
            "larger window (llama.cpp: llama-server -c 32768; vLLM: --max-model-len; Ollama: num_ctx) or use a model "
            "with a longer one")
