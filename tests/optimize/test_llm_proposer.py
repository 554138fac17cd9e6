"""The generator and analyst as the loop's proposer (kforge_bot.optimize.llm_proposer): each exchange with the
model reported as it happens, in the order the trajectory keeps, and what the proposals carry."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes.llm_server import ScriptedLLMServer, prompt_tokens_of, reply
from test_protocols import answer_of, asking, view_of
from test_trajectory import result, start_event

from kforge_bot.agents import analyst
from kforge_bot.agents.llm import Endpoint, LLMClient, Reply, Usage
from kforge_bot.errors import ContextLengthExceeded, LLMUnavailable, MalformedReply
from kforge_bot.optimize.llm_proposer import LLMProposer
from kforge_bot.optimize.protocols import Interrupted
from kforge_bot.optimize.trajectory import Trajectory
from kforge_bot.kernelspec import load_spec

FIXTURE = Path(__file__).parents[1] / "data" / "optimize"
SPEC = load_spec(FIXTURE / "kforge.yaml")
ADVICE = "Recommendations:\n1. Raise TILE_N from 32 to 64.\n2. Then try THREADS = 2."


def fenced(source: str) -> str:
    return f"Here it is.\n\n```python\n{source}```\n"


class Client:
    """The LLMClient's surface as the proposer uses it, answering from a script (a Reply, or an exception)."""

    def __init__(self, script: Sequence[Reply | BaseException]) -> None:
        self.endpoint = Endpoint("http://127.0.0.1:1/v1", "sk-test", "model-a")
        self.usage = Usage()
        self.script = list(script)
        self.asked: list[tuple[list[dict[str, str]], str | None]] = []

    def resolve_model(self) -> str:
        return "model-a"

    def chat(self, messages: list[dict[str, str]], model: str | None = None, max_tokens: int | None = None) -> Reply:
        self.asked.append((messages, model))
        answer = self.script.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        self.usage.calls += 1
        return answer


def trajectory(tmp_path: Path) -> Trajectory:
    t = Trajectory.create(tmp_path)
    start_event(t)
    t.append("baseline", result=result(speedup=1.0), eval_s=1.0)
    return t


def test_a_proposal_reports_the_prompt_then_the_reply_and_carries_the_kernel(tmp_path: Path) -> None:
    faster = SPEC.baseline.source.replace("TILE_N = 32", "TILE_N = 64")
    client = Client([Reply(ADVICE, 100, 20, model="model-a"), Reply(fenced(faster), 300, 900, model="model-a")])
    proposer = LLMProposer(client, SPEC, "cpu")  # type: ignore[arg-type]
    t = trajectory(tmp_path)
    view = view_of(t)
    events, _ = answer_of(proposer.observe(view, ()))  # the analyst reads the kernel as written first
    assert [(e.kind, e.fields.get("agent")) for e in events] == [("prompt", "analyst"), ("reply", "analyst"),
                                                                ("recommendations", None)]
    assert events[2].fields == {"for_iteration": 0, "items": ["Raise TILE_N from 32 to 64.", "Then try THREADS = 2."]}
    for e in events:
        t.append(e.kind, **e.fields)

    events, proposal = answer_of(proposer.propose(asking(view, 1)))
    assert [e.kind for e in events] == ["prompt", "reply"]
    assert events[1].fields["completion_tokens"] == 900 and events[1].fields["usage"]["calls"] == 2
    assert proposal is not None and proposal.source == faster
    assert proposal.parent == 0 and proposal.model == "model-a"  # from the kernel as written, by the run's model
    prompt = "\n".join(m["content"] for m in client.asked[1][0])
    assert "Raise TILE_N from 32 to 64" in prompt  # the analyst's advice
    assert "## Current best (the baseline, as written)\n```python\nas written\n```" in prompt  # the view's source


def test_failures_are_reported_before_they_end_the_call(tmp_path: Path) -> None:
    t = trajectory(tmp_path)
    view = view_of(t)
    gone = LLMUnavailable("HTTP 401: Incorrect API key provided.", status=401)
    proposer = LLMProposer(Client([Reply("I would raise TILE_N.", 10, 5), MalformedReply("empty reply"), gone]),  # type: ignore[arg-type]
                           SPEC, "cpu")
    unusable = proposer.propose(asking(view, 1))  # no code block: the history entry keeps the reply's text
    assert [e.kind for e in unusable.events] == ["prompt", "reply"] and unusable.proposal is None
    assert isinstance(unusable.signal, MalformedReply)
    assert unusable.signal.reply == "I would raise TILE_N."  # type: ignore[attr-defined]

    empty = proposer.propose(asking(view, 2))
    assert isinstance(empty.signal, MalformedReply) and [e.kind for e in empty.events] == ["prompt", "reply"]
    assert empty.events[1].fields["text"] == "" and empty.events[1].fields["completion_tokens"] == 0

    refused = proposer.propose(asking(view, 3))
    assert isinstance(refused.signal, LLMUnavailable) and [e.kind for e in refused.events] == ["prompt", "llm_error"]
    assert refused.events[1].fields["kind"] == "LLMUnavailable" and "401" in refused.events[1].fields["message"]


def test_a_round_rotates_the_models_over_the_beams_parents_and_the_analyst_reads_the_best(tmp_path: Path) -> None:
    t = trajectory(tmp_path)
    for n, speedup in ((1, 1.2), (2, 1.4)):
        t.append("candidate", iteration=n, file=t.write_source(f"000{n}.py", SPEC.baseline.source + f"# v{n}\n"),
                 sha256=str(n))
        t.append("result", iteration=n, result=result(speedup=speedup), accepted=True)
    view = view_of(t, parallel=2, beam=2)
    client = Client([Reply(fenced(SPEC.baseline.source + f"# w{n}\n"), 10, 10, model="served") for n in (3, 4)]
                    + [Reply(ADVICE, 10, 10)])
    proposer = LLMProposer(client, SPEC, "cpu", models=["model-a", "model-b"])  # type: ignore[arg-type]
    _, first = answer_of(proposer.propose(asking(view, 3, slot=0)))
    _, second = answer_of(proposer.propose(asking(view, 4, slot=1)))
    assert first is not None and second is not None
    assert (first.parent, first.model, second.parent, second.model) == (2, "model-a", 1, "model-b")
    assert [model for _, model in client.asked] == ["model-a", "model-b"]
    assert "# v2" in client.asked[0][0][1]["content"] and "# v1" in client.asked[1][0][1]["content"]

    judged = [t.record.iterations[1], t.record.iterations[2]]
    events, _ = answer_of(proposer.observe(view, judged))
    assert [e.kind for e in events] == ["prompt", "reply", "recommendations"]
    assert events[-1].fields["for_iteration"] == 2  # the round's best accepted candidate, once
    assert client.asked[-1][1] is None  # the analyst keeps the run's own model


def test_a_wrong_endpoint_is_reported_before_any_evaluation() -> None:
    class Refusing(Client):
        def resolve_model(self) -> str:
            raise LLMUnavailable("HTTP 404 from GET /models", status=404)

    exchange = LLMProposer(Refusing([]), SPEC, "cpu").prepare()  # type: ignore[arg-type]
    (event,) = exchange.events
    assert isinstance(exchange.signal, LLMUnavailable)
    assert event.kind == "llm_error" and event.fields["agent"] == "models" and event.fields["iteration"] == 0


def _failures(t: Trajectory, count: int) -> None:
    """`count` compile errors with long logs: the history a long run carries into every prompt."""
    for n in range(1, count + 1):
        t.append("candidate", iteration=n, file=t.write_source(f"{n:04d}.py", SPEC.baseline.source + f"# try {n}\n"),
                 sha256=f"s{n}")
        t.append("result", iteration=n, accepted=False,
                 result=result(verdict="compile_error", reason=f"error {n}: " + "undefined symbol TILE_M\n" * 150),
                 history_entry={"iteration": n, "verdict": "compile_error", "outputs": [],
                                "reason": f"error {n}: " + "undefined symbol TILE_M\n" * 150,
                                "source": SPEC.baseline.source + f"# try {n}\n"})


def test_a_prompt_over_the_context_window_is_sent_again_shorter_by_the_rule(tmp_path: Path) -> None:
    """A real server's refusal (llama.cpp's exceed_context_size_error) costs no iteration: the generator's prompt
    is rebuilt with less history until it fits, and each step is in the trajectory."""
    t = trajectory(tmp_path)
    _failures(t, 6)
    view = view_of(t)
    # The whole prompt, as the server will count it: the window holds half of it.
    refusing = LLMProposer(Client([LLMUnavailable("not asked")]), SPEC, "cpu")  # type: ignore[arg-type]
    unsent = refusing.propose(asking(view, 7))
    full = prompt_tokens_of({"messages": unsent.events[0].fields["messages"]})
    kernel = SPEC.baseline.source.replace("TILE_N = 32", "TILE_N = 64")
    with ScriptedLLMServer([reply(fenced(kernel))], n_ctx=full // 2) as server:
        client = LLMClient(Endpoint(server.base_url, None, "m"), sleep=lambda _: None)
        events, proposal = answer_of(LLMProposer(client, SPEC, "cpu").propose(asking(view, 7)))
        bodies = server.chat_requests
    kinds = [e.kind for e in events]
    assert kinds[0] == "prompt" and kinds[-1] == "reply" and "prompt_trimmed" in kinds
    trims = [e.fields for e in events if e.kind == "prompt_trimmed"]
    assert [f["step"] for f in trims] == list(range(1, len(trims) + 1))
    assert trims[0]["context_tokens"] == full // 2 and trims[0]["prompt_tokens"] > full // 2
    sent = [prompt_tokens_of(b) for b in bodies]
    assert sent == sorted(sent, reverse=True) and sent[-1] < full // 2 <= sent[-2]  # shorter each time, the last fits
    assert proposal is not None and proposal.source == kernel
    last = bodies[-1]["messages"][1]["content"]
    assert "error 6" in last and "error 1:" not in last  # the newest failure is what a shorter prompt keeps


def test_when_even_the_shortest_prompt_does_not_fit_the_run_stops_with_one_line(tmp_path: Path) -> None:
    t = trajectory(tmp_path)
    _failures(t, 2)
    with ScriptedLLMServer([], n_ctx=200) as server:
        client = LLMClient(Endpoint(server.base_url, None, "m"), sleep=lambda _: None)
        exchange = LLMProposer(client, SPEC, "cpu").propose(view_of(t, iteration=3))
        events = exchange.events
        with pytest.raises(ContextLengthExceeded) as info:
            answer_of(exchange)
        assert len(server.chat_requests) == 4  # the whole prompt and the rule's three shorter ones
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("the generator's shortest prompt does not fit the model's context window (")
    assert "the window holds 200)" in message and "llama-server -c 32768" in message
    assert events[-1].kind == "llm_error" and events[-1].fields["kind"] == "ContextLengthExceeded"


def test_the_analyst_asks_for_a_short_reply(tmp_path: Path) -> None:
    with ScriptedLLMServer([reply(ADVICE)]) as server:
        client = LLMClient(Endpoint(server.base_url, None, "m"), sleep=lambda _: None)
        answer_of(LLMProposer(client, SPEC, "cpu").observe(view_of(trajectory(tmp_path)), ()))
        (body,) = server.chat_requests
    assert body["max_tokens"] == analyst.MAX_REPLY_TOKENS == 1024


def test_ctrl_c_during_a_request_hands_the_loop_the_prompt_already_reported(tmp_path: Path) -> None:
    view = view_of(trajectory(tmp_path))
    proposer = LLMProposer(Client([KeyboardInterrupt()]), SPEC, "cpu")  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt) as info:
        proposer.propose(asking(view, 1))
    assert isinstance(info.value, Interrupted)
    assert [(e.kind, e.fields["agent"]) for e in info.value.exchange.events] == [("prompt", "generator")]
