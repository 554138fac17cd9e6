"""What a user sees while `kforge-bot optimize` runs: a line per step, and a live status line on a terminal. It
reads the trajectory's events as the loop writes them (a listener) and the evaluator's progress messages."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from kforge_bot.optimize.protocols import TUNER
from kforge_bot.text import one_line


class Display:
    """What the user sees while it runs: a line per step, and a live status line on a terminal."""

    def __init__(self, console: Any, budgets: Any, proposer_kind: str) -> None:
        self.console = console
        self.budgets = budgets
        self.proposer_kind = proposer_kind  # TUNER or LLM: a tuner spends no tokens
        self.record: Any = None
        self._status: Any = None
        self._iteration = 0
        self._phase = "starting"

    def attach(self, record: Any) -> None:
        self.record = record

    def __enter__(self) -> Display:
        if self.console.is_terminal:
            self._status = self.console.status(self._status_text())
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)
            self._status = None

    def _best(self) -> str:
        best = self.record.best if self.record is not None else None
        return f"{best.speedup:.3f}x" if best is not None and best.speedup is not None else "none yet"

    def _tokens(self) -> str:
        usage = (self.record.usage if self.record is not None else None) or {}
        cap = f"/{self.budgets.tokens:,}" if self.budgets.tokens else ""
        return f" · tokens {usage.get('total_tokens', 0):,}{cap}" if self.proposer_kind != TUNER else ""

    def _status_text(self) -> str:
        it = f"iteration {self._iteration}/{self.budgets.iterations}" if self._iteration else "kernel as written"
        return f"{it} · best {self._best()}{self._tokens()} · {self._phase}"

    def _update(self, phase: str | None = None) -> None:
        if phase is not None:
            self._phase = phase
        if self._status is not None:
            self._status.update(self._status_text())

    def on_progress(self, message: dict[str, Any]) -> None:
        if message.get("type") != "progress":
            return
        phase = message.get("phase", "")
        if phase == "timing" and message.get("ci"):
            lo, hi = message["ci"]
            self._update(f"timing: {message.get('pairs')} pairs, {message.get('speedup', 0):.3f}x ({lo:.3f}-{hi:.3f})")
        else:
            self._update(f"{phase} {message.get('case', '')}".strip())

    def on_event(self, e: dict[str, Any]) -> None:
        kind = e.get("event")

        def out(text: str, markup: bool = False) -> None:
            self.console.print(text, markup=markup, highlight=False)

        if kind == "baseline":
            r = e["result"]
            ms = (r.get("baseline") or {}).get("median_ms")
            # Says which evaluation: the report's table times both columns in the best candidate's evaluation.
            timing = f", {ms:.3f} ms per call (median, this first evaluation)" if isinstance(ms, (int, float)) else ""
            out(f"kernel as written: {r.get('verdict')}{timing} on {r.get('device_name') or r.get('target')}")
        elif kind == "ceilings":
            c = e.get("ceilings")
            out(f"roofline ceilings: {c.get('origin')} ({c.get('bandwidth_gbs') or 'n/a'} GB/s)" if c else
                f"roofline: {e.get('note') or 'no ceilings for this device'}")
        elif kind == "recommendations":
            items = e.get("items") or []
            which = "the kernel as written" if not e.get("for_iteration") else f"iteration {e['for_iteration']}"
            out(f"analyst ({which}): " + (items[0][:160] if items else "-") + (f" (+{len(items) - 1} more)" if len(items) > 1 else ""))
        elif kind == "prompt":
            self._iteration = max(self._iteration, int(e.get("iteration") or 0))
            self._update(f"asking the {e.get('agent')}")
        elif kind == "reply":
            self._update(f"{e.get('agent')} replied")
        elif kind == "candidate":
            self._iteration = int(e["iteration"])
            self._update(f"evaluating {e.get('change') or 'the candidate'}")
        elif kind == "malformed":
            if e.get("agent") == "analyst":
                out(f"analyst reply unusable: {e.get('feedback')}")
            else:
                out(f"[{e['iteration']}/{self.budgets.iterations}] reply unusable (costs the iteration): {e.get('feedback')}"
                    f" · best {self._best()}{self._tokens()}")
        elif kind == "result":
            it = self.record.iterations.get(int(e["iteration"])) if self.record is not None else None
            r = e["result"]
            speed = ""
            if r.get("speedup") is not None and r.get("speedup_ci"):
                speed = f" {r['speedup']:.3f}x ({r['speedup_ci'][0]:.3f}-{r['speedup_ci'][1]:.3f})"
            change = escape(f"{it.change}: ") if it is not None and it.change else ""
            verdict = r.get("verdict")
            tail = " [green]new best[/green]" if e.get("accepted") else ""
            if verdict != "pass":
                tail = escape(f" ({one_line(str(r.get('reason', '')), 100)})")
            if r.get("cached"):
                tail += " (cache hit)"
            if e.get("round") is not None:
                tail += escape(f" [round {e['round']}]")
            out(escape(f"[{e['iteration']}/{self.budgets.iterations}] ") + f"{change}{verdict}{speed}{tail} · best "
                f"{self._best()}{self._tokens()}", markup=True)
        elif kind == "prompt_trimmed":
            tokens = f" ({e['prompt_tokens']:,} tokens, the window holds {e['context_tokens']:,})" if (
                e.get("prompt_tokens") and e.get("context_tokens")) else ""
            out(f"the {e.get('agent')}'s prompt does not fit the model's context window{tokens}: sent again shorter "
                f"(step {e.get('step')} of the trim rule)")
        elif kind == "llm_error":
            out("[red]LLM endpoint[/red]: " + escape(str(e.get("message"))), markup=True)
        self._update()


