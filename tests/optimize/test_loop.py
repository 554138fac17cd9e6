"""The loop end to end on a tiny C kernel: real evaluations in child processes, the real `openai` client
against a scripted OpenAI-compatible server on loopback, and runs stopped and resumed from their trajectory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path

import pytest
from fakes.llm_server import HTTPError, ScriptedLLMServer, rate_limited, reply

from kforge_bot.agents.llm import Endpoint
from kforge_bot.config.policy import Budgets
from kforge_bot.errors import BudgetExhausted, MalformedReply, NearRoofline, NoProgress
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.optimize.acceptance import accepts
from kforge_bot.optimize.loop import Loop
from kforge_bot.optimize.protocols import Exchange, Interrupted, Measured, Proposal, RunView
from kforge_bot.optimize.record import IterationRecord
from kforge_bot.optimize.run import OptimizeRun, RunConfig
from kforge_bot.optimize.stops import StopRules
from kforge_bot.optimize.trajectory import Trajectory, replay, sha256
from kforge_bot.optimize.tuner_proposer import TunerProposer
from kforge_bot.kernelspec import Implementation, load_spec

FIXTURE = Path(__file__).parents[1] / "data" / "optimize"
SETTINGS = EvalSettings(seeds=2, timing_budget_s=0.5, timeout_s=120)


class AtOnce:
    """An evaluator that measures with a plain function, at once (the loop's `Evaluator` protocol)."""

    slots = 1

    def __init__(self, measure: Callable[[Implementation], tuple[EvalResult, float]]) -> None:
        self.measure = measure

    def submit(self, implementation: Implementation) -> Future[Measured]:
        done: Future[Measured] = Future()
        done.set_result(Measured(*self.measure(implementation)))
        return done

    def compiled_baselines(self, kinds: Sequence[str]) -> dict:
        raise AssertionError("this run asks for no compiled baseline")


def source_with(base: str, **subs: str) -> str:
    out = base
    for old, new in subs.items():
        assert old in out or re.search(old, out, re.MULTILINE), old
        out = re.sub(old, new, out, flags=re.MULTILINE) if old.startswith("^") else out.replace(old, new)
    return out


def fenced(source: str, prose: str = "Here is the whole file.") -> str:
    return f"{prose}\n\n```python\n{source}```\n"


ADVICE_A = "Recommendations:\n1. Raise TILE_N from 32 to 64 so the inner j loop vectorizes.\n2. Then try THREADS = 2."
ADVICE_B = "Recommendations:\n1. Now share the row tiles between cores: THREADS = 2.\n2. Try TILE_M = 16."


def events(folder: Path, kind: str) -> list[dict]:
    import json

    return [e for e in map(json.loads, (folder / "trajectory.jsonl").read_text().splitlines()) if e["event"] == kind]


@pytest.mark.slow
def test_llm_conversation_feedback_reaches_the_model_and_a_resumed_run_keeps_its_history(
        kernel_dir: Path, tmp_path: Path) -> None:
    spec = load_spec(kernel_dir / "kforge.yaml")
    base = spec.baseline.source
    broken = source_with(base, **{"float v = acc[i][j] + bias[j0 + j];":
                                  "float v = acc[i][j] + bias[j0 + j] + undeclared_offset;"})
    wrong = source_with(base, **{"out[(long)(i0 + i) * N + j0 + j] = v > 0.0f ? v : 0.0f;":
                                 "out[(long)(i0 + i) * N + j0 + j] = v;"})  # forgot the relu
    faster = source_with(base, **{"^TILE_N = 32": "TILE_N = 64"})
    report = tmp_path / "report"

    with ScriptedLLMServer([reply(ADVICE_A), reply(fenced(broken)), rate_limited(0.01), reply(fenced(wrong)),
                            reply("You should raise TILE_N; that will be faster.")], api_key="test-key") as server:
        endpoint = Endpoint(server.base_url, "test-key", "kforge-test-model")
        config = RunConfig(target="cpu", budgets=Budgets(iterations=3, tokens=10**7), settings=SETTINGS,
                           endpoint=endpoint)
        first = OptimizeRun.open(spec, config, report)
        outcome = first.run()
        first.finish()

        prompts = server.prompts()
        assert len(prompts) == 5  # analyst, generator x3, and the retry after the 429
        assert "performance-analysis agent" in server.chat_requests[0]["messages"][0]["content"]
        assert "Profile of `tiny_mm`" in prompts[0] and "the baseline as written" in prompts[0]
        # Iteration 1: the analyst's advice and the kernel as written reach the generator.
        assert "Raise TILE_N from 32 to 64" in prompts[1] and "TILE_N = 32" in prompts[1]
        assert "Attempts so far" not in prompts[1]
        # Iteration 2 (sent twice: the 429 was retried): the compiler's own error message.
        assert prompts[2] == prompts[3]
        assert "did not compile" in prompts[3] and "undeclared_offset" in prompts[3] and "error" in prompts[3]
        # Iteration 3: the correctness diff, which output and how far off.
        assert "wrong results" in prompts[4] and "Outputs outside the tolerance" in prompts[4]
        assert re.search(r"output 0 \(float32, shape \[128, 128\]\).*elements outside atol", prompts[4])
        assert "forgot" not in prompts[4]

        record = outcome.record
        assert [it.verdict for it in record.completed] == ["compile_error", "incorrect", "malformed"]
        assert outcome.stop_kind == "BudgetExhausted" and not outcome.improved
        assert [e["attempts"] for e in events(report, "reply") if e["iteration"] == 2] == [2]
        assert (report / "candidates" / "0001.py").read_text() == broken
        assert not (report / "candidates" / "0003.py").exists()  # the malformed reply produced no candidate
        assert "No candidate beat the kernel as written" in (report / "report.md").read_text()

        # A run killed after writing iteration 4's candidate and before judging it leaves this behind
        # (the candidate repeats iteration 2's source, so judging it reuses that result).
        killed = Trajectory.open(report)
        killed.append("candidate", iteration=4, file=killed.write_source("0004.py", wrong), sha256=sha256(wrong))

        # Resume with a larger budget: history, advice and token counts come back from the trajectory.
        server.push(reply(fenced(faster)), reply(ADVICE_B), HTTPError(401, "Incorrect API key provided."))
        config = RunConfig(target="cpu", budgets=Budgets(iterations=6, tokens=10**7), settings=SETTINGS,
                           endpoint=endpoint)  # 4 misses in a row so far; patience (4) counts this session
        second = OptimizeRun.open(load_spec(kernel_dir / "kforge.yaml"), config, report, resume=True)
        outcome = second.run()
        second.finish(written_to=None)
        prompts = server.prompts()[5:]

    assert len(prompts) == 3  # iteration 4 was judged without asking the model again
    # Iteration 5 sees every failure since the last accepted candidate, across the sessions.
    assert "no fenced code block" in prompts[0] and "undeclared_offset" in prompts[0]
    assert "Outputs outside the tolerance" in prompts[0] and "Raise TILE_N from 32 to 64" in prompts[0]
    assert "Attempt 4: wrong results" in prompts[0]
    # The analyst reads the accepted candidate's profile; its advice and the new best reach iteration 6.
    assert "the current best" in prompts[1] and "TILE_N = 64" in prompts[1]
    assert "THREADS = 2" in prompts[2] and "Current best (correct," in prompts[2] and "TILE_N = 64" in prompts[2]
    assert "Attempts so far" not in prompts[2]  # failures on the old best are not the new best's problem

    record = outcome.record
    assert outcome.stop_kind == "LLMUnavailable" and "401" in outcome.stop_reason
    assert [it.iteration for it in record.completed] == [1, 2, 3, 4, 5]
    assert record.iterations[4].duplicate_of == 2 and record.iterations[4].verdict == "incorrect"
    best = record.best
    assert best is not None and best.iteration == 5 and best.speedup_ci is not None and best.speedup_ci[0] > 1.0
    assert outcome.best_source == faster == (report / "best.py").read_text()
    assert record.usage["calls"] == 6 and record.usage["retries"] == 1  # counted across the sessions
    assert len(events(report, "baseline")) == 1  # the kernel as written was measured once
    assert [e["agent"] for e in events(report, "llm_error")] == ["generator"]
    assert replay(report).best.iteration == 5
    text = (report / "report.md").read_text()
    assert "over 2 sessions" in text and f"**{best.speedup:.2f}x faster**" in text
    assert "| iterations | 5 of 6 |" in text and "same source as iteration 2" in text
    how = outcome.how_found()  # what the PR bot's evidence shows
    assert how["iterations"] == 5 and how["model"] == "kforge-test-model" and how["tokens"] > 0
    assert len(how["steps"]) == 1 and how["steps"][0].startswith("iteration 5:")
    assert how["rejected"] == {"compile_error": 1, "incorrect": 2, "malformed": 1}
    assert "test-key" not in (report / "trajectory.jsonl").read_text()  # the key is never recorded


@pytest.mark.slow
def test_tuner_finds_a_faster_variant_and_resumes_without_proposing_it_again(kernel_dir: Path, tmp_path: Path) -> None:
    spec = load_spec(kernel_dir / "kforge.yaml")
    report = tmp_path / "report"
    # A longer timing budget than the other tests: the verdict rests on a measured interval, and 0.5 s of
    # pairs on a busy 2-core CI machine once left it straddling 1.
    settings = EvalSettings(seeds=2, timing_budget_s=2.0, timeout_s=120)
    run = OptimizeRun.open(spec, RunConfig(target="cpu", budgets=Budgets(iterations=1), settings=settings,
                                           cpu_count=2), report)
    outcome = run.run()
    run.finish()
    best = outcome.record.best
    assert best is not None and best.change == "TILE_N 32->64"  # the marked parameter goes first
    assert best.verdict == "pass" and best.speedup_ci is not None and best.speedup_ci[0] > 1.0
    assert "TILE_N = 64  # kforge: tune" in (outcome.best_source or "")
    assert [e["tunables"] for e in events(report, "tunables")][0][1].startswith("TILE_N = 32")

    again = OptimizeRun.open(load_spec(kernel_dir / "kforge.yaml"),
                             RunConfig(target="cpu", budgets=Budgets(iterations=2), settings=settings, cpu_count=2),
                             report, resume=True)
    outcome = again.run()
    again.finish()
    record = outcome.record
    assert [it.iteration for it in record.completed] == [1, 2]
    second = record.iterations[2]
    assert second.assignment == {"TILE_M": 8, "TILE_N": 64, "THREADS": 2}  # continues from the best, not from scratch
    assert second.change == "TILE_N 32->64, THREADS 1->2"
    assert len(events(report, "baseline")) == 1
    assert outcome.stop_reason == "iteration budget spent (2 of 2)"
    assert (kernel_dir / "tiny_mm.py").read_text() == spec.baseline.source  # the loop never writes the kernel


# ---------------------------------------------------------------------------------- stop rules (fast)


def idle_loop(tmp_path: Path, budgets: Budgets, rules: StopRules | None = None, clock: list[float] | None = None,
              spec_path: Path = FIXTURE / "kforge.yaml") -> Loop:
    """A loop whose state comes only from trajectory events: these tests never reach an evaluation."""
    spec = load_spec(spec_path)
    trajectory = Trajectory.create(tmp_path / "run")
    trajectory.append("start", schema=1, kernel=spec.name, kernel_file=spec.kernel_file, mode="tuner", target="cpu")

    def no_evaluation(candidate: object) -> tuple[EvalResult, float]:
        raise AssertionError("the stop rules must decide without evaluating anything")

    now = clock or [0.0]
    return Loop(spec, "cpu", TunerProposer(spec, cpu_count=2), trajectory, AtOnce(no_evaluation), budgets=budgets,
                rules=rules or StopRules(), clock=lambda: now[0])


def test_budgets_and_stop_rules_end_the_run_with_the_reason(tmp_path: Path) -> None:
    from test_trajectory import result

    loop = idle_loop(tmp_path / "a", Budgets(iterations=2))
    for n in (1, 2):
        loop.trajectory.append("candidate", iteration=n, file=loop.trajectory.write_source(f"{n}.py", "x"), sha256=str(n))
        loop.trajectory.append("result", iteration=n, result=result("incorrect"), accepted=False)
    with pytest.raises(BudgetExhausted, match=r"iteration budget spent \(2 of 2\)") as exc:
        loop._check_stop()
    assert exc.value.budget == "iterations"

    clock = [0.0]
    loop = idle_loop(tmp_path / "b", Budgets(iterations=9, time_limit_s=60), clock=clock)
    loop._check_stop()
    clock[0] = 61.0
    with pytest.raises(BudgetExhausted, match="time limit reached") as exc:
        loop._check_stop()
    assert exc.value.budget == "time"
    clock[0] = 30.0
    loop.trajectory.append("candidate", iteration=1, file=loop.trajectory.write_source("1.py", "x"), sha256="1")
    loop.trajectory.append("result", iteration=1, result=result("incorrect"), accepted=False, iteration_s=25.0)
    loop._check_stop()  # 30 s spent, a step takes 25 s: it still fits in 60
    clock[0] = 40.0
    with pytest.raises(BudgetExhausted, match="40 s of 60 s spent and a step takes about 25 s"):
        loop._check_stop()  # the next step would end near 65 s: do not start it

    loop = idle_loop(tmp_path / "c", Budgets(iterations=9, tokens=400))
    loop.trajectory.append("reply", iteration=1, agent="generator", text="", usage={"total_tokens": 450})
    with pytest.raises(BudgetExhausted, match=r"token budget spent \(450 of 400\)"):
        loop._check_stop()

    loop = idle_loop(tmp_path / "d", Budgets(iterations=9), StopRules(patience=2))
    for n in (1, 2):
        loop.trajectory.append("malformed", iteration=n, agent="generator", feedback="no code")
    with pytest.raises(NoProgress, match="no better candidate in the last 2 iterations"):
        loop._check_stop()
    loop._done_before = 2  # a resumed session: its own misses count, not the earlier session's
    loop._check_stop()
    loop.trajectory.append("malformed", iteration=3, agent="generator", feedback="no code")
    loop._check_stop()
    loop.trajectory.append("malformed", iteration=4, agent="generator", feedback="no code")
    with pytest.raises(NoProgress, match="in the last 2 iterations"):
        loop._check_stop()


def test_near_the_roofline_the_run_stops(tmp_path: Path) -> None:
    from test_trajectory import result

    loop = idle_loop(tmp_path, Budgets(iterations=9), StopRules(roofline_fraction=0.9))
    loop.trajectory.append("baseline", result=result(base_ms=1.0, cand_ms=1.0))
    loop.trajectory.append("workload", shape_sets=[{"bytes": 95e6, "flops": None}], basis="test")
    loop.trajectory.append("ceilings", ceilings={"bandwidth_gbs": 100.0, "tflops": {}, "origin": "measured",
                                                 "source": "test"})
    with pytest.raises(NearRoofline, match=r"the kernel as written reaches 95% of its peak bandwidth"):
        loop._check_stop()  # 95 MB in 1 ms = 95 GB/s of 100


def test_acceptance_needs_the_whole_interval_above_1_and_a_real_gain_over_the_best(tmp_path: Path) -> None:
    from test_trajectory import result

    loop = idle_loop(tmp_path, Budgets(iterations=9), StopRules(min_gain=0.02))

    def accepted(got: dict) -> bool:
        return accepts(loop.record, EvalResult.from_dict(got), loop.rules.min_gain)

    assert accepted(result(speedup=1.5, ci=(1.2, 1.8)))
    assert not accepted(result(speedup=1.5, ci=(0.98, 2.0)))  # could be noise
    assert not accepted(result("incorrect"))
    loop.trajectory.append("candidate", iteration=1, file=loop.trajectory.write_source("1.py", "x"), sha256="1")
    loop.trajectory.append("result", iteration=1, result=result(speedup=1.5, ci=(1.2, 1.8)), accepted=True)
    assert not accepted(result(speedup=1.52, ci=(1.4, 1.6)))  # within min_gain
    assert accepted(result(speedup=1.6, ci=(1.4, 1.8)))


# ---------------------------------------------------------------------------------- one path, step and round (fast)


class Scripted:
    """Proposes the given sources in turn (None: a reply with no code), reporting a prompt for each."""

    kind = "llm"

    def __init__(self, sources: list[str | None]) -> None:
        self.sources = sources
        self.observed: list[list[int]] = []

    def describe(self) -> dict:
        return {}

    def prepare(self) -> Exchange:
        return Exchange()

    def propose(self, view: RunView) -> Exchange:
        out = Exchange()
        out.report("prompt", iteration=view.iteration, agent="generator", messages=[])
        source = self.sources.pop(0)
        if source is None:
            out.signal = MalformedReply("the reply had no fenced code block")
        else:
            out.proposal = Proposal(source=source, parent=0, model="m")
        return out

    def observe(self, view: RunView, judged: Sequence[IterationRecord]) -> Exchange:
        if judged:
            self.observed.append([it.iteration for it in judged])
        return Exchange()


def scripted_loop(tmp_path: Path, sources: list[str | None], iterations: int, parallel: int = 1,
                  kind: type[Scripted] | None = None, tokens: int | None = None) -> tuple[Loop, Scripted, list[str]]:
    from test_trajectory import result

    spec = load_spec(FIXTURE / "kforge.yaml")
    trajectory = Trajectory.create(tmp_path)
    trajectory.append("start", schema=1, kernel=spec.name, kernel_file=spec.kernel_file, mode="llm", target="cpu")
    measured: list[str] = []

    def evaluator(candidate: Implementation) -> tuple[EvalResult, float]:
        measured.append(candidate.source)
        speedup = {"fast\n": 1.5, "faster\n": 2.0}.get(candidate.source, 1.0)
        return EvalResult.from_dict(result(speedup=speedup, ci=(speedup - 0.1, speedup + 0.1))), 1.0

    proposer = (kind or Scripted)(sources)
    loop = Loop(spec, "cpu", proposer, trajectory, AtOnce(evaluator),
                budgets=Budgets(iterations=iterations, tokens=tokens),
                rules=StopRules(patience=9), parallel=parallel)
    return loop, proposer, measured


def test_a_step_writes_the_candidate_then_its_result_and_a_repeat_is_not_measured_again(tmp_path: Path) -> None:
    loop, proposer, measured = scripted_loop(tmp_path, ["fast\n", None, "fast\n", "faster\n"], iterations=4)
    assert loop.run()[0] == "BudgetExhausted"
    steps = [(e["event"], e.get("iteration")) for e in loop.trajectory.events if e["event"] not in
             ("start", "session", "baseline", "workload", "ceilings", "stop")]
    assert steps == [("prompt", 1), ("candidate", 1), ("result", 1), ("prompt", 2), ("malformed", 2),
                     ("prompt", 3), ("candidate", 3), ("result", 3), ("prompt", 4), ("candidate", 4), ("result", 4)]
    results = {e["iteration"]: e for e in loop.trajectory.events if e["event"] == "result"}
    assert [results[n]["accepted"] for n in (1, 3, 4)] == [True, False, True]
    assert results[3]["duplicate_of"] == 1 and "round" not in results[3] and "loop_s" not in results[3]
    candidate = next(e for e in loop.trajectory.events if e["event"] == "candidate")
    assert "round" not in candidate and "model" not in candidate  # a step's candidate event, as before rounds
    assert measured == [loop.spec.baseline.source, "fast\n", "faster\n"]
    assert (loop.trajectory.root / "best.py").read_text() == "faster\n"
    assert proposer.observed == [[1], [3], [4]]  # each judged candidate, once; a malformed reply is none


def test_a_round_writes_its_candidates_first_and_a_twin_is_measured_once(tmp_path: Path) -> None:
    loop, proposer, measured = scripted_loop(tmp_path, ["fast\n", "fast\n"], iterations=2, parallel=2)
    loop.run()
    steps = [(e["event"], e.get("iteration")) for e in loop.trajectory.events if e["event"] in ("candidate", "result")]
    assert steps == [("candidate", 1), ("candidate", 2), ("result", 1), ("result", 2)]
    first, twin = [e for e in loop.trajectory.events if e["event"] == "result"]
    assert first["accepted"] and not twin["accepted"] and twin["duplicate_of"] == 1 and twin["eval_s"] == 0.0
    assert first["round"] == twin["round"] == 1 and first["loop_s"] >= 0.0
    candidate = next(e for e in loop.trajectory.events if e["event"] == "candidate")
    assert (candidate["round"], candidate["parent"], candidate["model"]) == (1, 0, "m")
    assert measured == [loop.spec.baseline.source, "fast\n"] and proposer.observed == [[1, 2]]


@pytest.mark.slow
def test_a_candidate_far_slower_on_one_shape_set_is_not_accepted_however_fast_on_the_others(tmp_path: Path) -> None:
    """Real evaluations: the candidate is far faster than the kernel as written on two shape sets and far slower on
    the third. Pooled into one median its interval lay above 1 and it was accepted; shape set by shape set, the
    slow one is a regression (the policy's rule, as in the gate) and the candidate is not accepted."""
    from dataclasses import replace

    from fakes.gate_repos import REF, SLOW_ON_LARGE, SLOW_ON_SMALL, shaped_manifest

    from kforge_bot.optimize.evaluator import HarnessEvaluator
    from kforge_bot.config.policy import load_policy

    folder = tmp_path / "kernel"
    folder.mkdir()
    (folder / "ref.py").write_text(REF)
    (folder / "mm.py").write_text(SLOW_ON_LARGE)
    (folder / "kforge.yaml").write_text(shaped_manifest("mm", [16, 96, 128]))
    spec = load_spec(folder / "kforge.yaml")
    settings = EvalSettings(seeds=2, timing_budget_s=3.0, timeout_s=120, allow_framework_fallback=True)
    settings = replace(settings, **load_policy().rule_for(spec.name, spec.kernel_file, "cpu").shape_settings())
    trajectory = Trajectory.create(tmp_path / "run")
    trajectory.append("start", schema=1, kernel=spec.name, kernel_file=spec.kernel_file, mode="llm", target="cpu")
    evaluator = HarnessEvaluator(spec, "cpu", settings)
    try:
        loop = Loop(spec, "cpu", Scripted([SLOW_ON_SMALL]), trajectory, evaluator, budgets=Budgets(iterations=1),
                    rules=StopRules(patience=9))
        loop.run()
    finally:
        evaluator.close()
    it = loop.record.iterations[1]
    assert it.verdict == "pass" and not it.accepted, it.reason
    assert loop.record.best is None
    per_shape = it.result["per_shape"]
    assert [(p["shape_set"], p["regression"]) for p in per_shape] == [(0, True), (1, False), (2, False)]
    assert "but a regression on shape set 0 (n=16)" in it.reason
    assert not (trajectory.root / "best.py").exists()
    # report.md shows the per-shape table beside the headline, and why the candidate was not taken.
    from kforge_bot.optimize.report import write_report

    markdown = write_report(trajectory.root, loop.record).markdown.read_text()
    assert "## Per shape set" in markdown and "| shape set 0 (n=16) |" in markdown
    assert "Not accepted: a regression on shape set 0 (n=16)" in markdown
    assert "| regression (over 5.0% slower) |" in markdown


class _WithCompiled(AtOnce):
    """A scripted evaluator whose session also measured the kernel as written under torch.compile."""

    def __init__(self, compiled: dict) -> None:
        super().__init__(self.speed_of)
        self.compiled = compiled
        self.asked: list[tuple[str, ...]] = []

    @staticmethod
    def speed_of(candidate: Implementation) -> tuple[EvalResult, float]:
        from test_trajectory import result

        speedup = {"fast\n": 1.5, "faster\n": 2.0, "fastest\n": 3.0}.get(candidate.source, 1.0)
        return EvalResult.from_dict(result(speedup=speedup, ci=(speedup - 0.1, speedup + 0.1))), 1.0

    def compiled_baselines(self, kinds: Sequence[str]) -> dict:
        from kforge_bot.evaluate.baselines import CompiledBaseline

        self.asked.append(tuple(kinds))
        return {k: CompiledBaseline.from_dict(self.compiled) for k in kinds}


def _compiled_loop(tmp_path: Path, compiled: dict, sources: list[str | None]) -> tuple[Loop, _WithCompiled]:
    spec = load_spec(FIXTURE / "kforge.yaml")
    trajectory = Trajectory.create(tmp_path)
    trajectory.append("start", schema=1, kernel=spec.name, kernel_file=spec.kernel_file, mode="llm", target="cpu")
    evaluator = _WithCompiled(compiled)
    loop = Loop(spec, "cpu", Scripted(sources), trajectory, evaluator, budgets=Budgets(iterations=len(sources)),
                rules=StopRules(patience=9), baselines=("eager", "compile"))
    return loop, evaluator


def test_with_a_compiled_baseline_only_what_beats_the_faster_of_the_two_is_accepted(tmp_path: Path) -> None:
    from kforge_bot.optimize.report import render_markdown

    compiled = {"kind": "compile", "verdict": "pass", "reason": "correct on every case; 1.8x", "per_shape": [
        {"shape_set": 0, "speedup_over_eager": 1.8, "speedup_over_eager_ci": [1.7, 1.9], "median_ms": 1.1}]}
    loop, evaluator = _compiled_loop(tmp_path, compiled, ["fast\n", "faster\n", "fastest\n"])
    loop.run()
    assert evaluator.asked == [("compile",)]  # measured once for the session, and recorded
    assert [e["baselines"]["compile"]["verdict"] for e in events(tmp_path, "compiled_baselines")] == ["pass"]
    results = {e["iteration"]: e for e in events(tmp_path, "result")}
    # 1.5x and 2.0x eager's speed are faster than eager but not (with confidence) than torch.compile's 1.8x
    assert [results[n]["accepted"] for n in (1, 2, 3)] == [False, False, True]
    assert results[3]["result"]["details"]["accepted_against"] == "the faster of eager and compile"
    best = results[3]["result"]["details"]["baselines"]
    assert best["compile"]["against"]["speedup"] == pytest.approx(3.0 / 1.8)
    assert best["best"]["faster_of"] == {"0": "compile"}
    report = render_markdown(loop.record)
    assert "## Baselines" in report and "- accepted against: the faster of eager and compile" in report
    assert "best candidate against the faster of eager and compile (the KForge paper's metric): 1.667x" in report


def test_a_dropped_compiled_baseline_leaves_acceptance_against_eager(tmp_path: Path) -> None:
    from kforge_bot.optimize.report import render_markdown

    dropped = {"kind": "compile", "verdict": "compile_error", "reason": "dropped: the compile baseline is "
               "compile_error: InductorError: no C++ compiler", "per_shape": []}
    loop, _ = _compiled_loop(tmp_path, dropped, ["fast\n"])
    loop.run()
    result = next(e for e in events(tmp_path, "result") if e["iteration"] == 1)
    assert result["accepted"] and result["result"]["details"]["accepted_against"] == "eager"
    report = render_markdown(loop.record)
    assert "the `compile` baseline: dropped: the compile baseline is compile_error" in report


class Spending(Scripted):
    """Each sample's reply costs 300 tokens (the client's running total rides on the reply event)."""

    def propose(self, view: RunView) -> Exchange:
        out = super().propose(view)
        spent = int(view.record.usage.get("total_tokens", 0)) + 300
        out.report("reply", iteration=view.iteration, agent="generator", text="", usage={"total_tokens": spent})
        return out


def test_the_loop_alone_owns_the_token_budget_and_asks_nothing_more_once_a_sample_spent_it(tmp_path: Path) -> None:
    loop, proposer, _ = scripted_loop(tmp_path, ["fast\n", "faster\n", "never\n"], iterations=9, parallel=3,
                                      kind=Spending, tokens=500)
    assert loop.run() == ("BudgetExhausted", "token budget spent (600 of 500)")
    assert proposer.sources == ["never\n"]  # the third sample was never asked for: 600 tokens were spent
    assert [e["iteration"] for e in events(tmp_path, "result")] == [1, 2]  # what the round launched is judged
    assert proposer.observed == []  # nor is the proposer's analyst asked about them


class Interrupting(Scripted):
    """Ctrl-C arrives while the model writes iteration 2, after its prompt was reported."""

    def propose(self, view: RunView) -> Exchange:
        out = super().propose(view)
        if view.iteration == 2:
            raise Interrupted(Exchange(events=out.events))
        return out


def test_ctrl_c_during_a_model_request_still_writes_its_prompt_then_the_stop(tmp_path: Path) -> None:
    loop, _, _ = scripted_loop(tmp_path, ["fast\n", "faster\n"], iterations=9, kind=Interrupting)
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    steps = [(e["event"], e.get("iteration")) for e in loop.trajectory.events if e["event"] in
             ("prompt", "candidate", "result", "stop")]
    assert steps == [("prompt", 1), ("candidate", 1), ("result", 1), ("prompt", 2), ("stop", 1)]
    assert loop.record.stop is not None and loop.record.stop["kind"] == "Interrupted"
    assert loop.record.fresh_iteration == 2  # a resumed run asks for iteration 2 again


@pytest.mark.slow
def test_a_held_out_failure_reaches_the_generator_as_one_line_without_the_variant(tmp_path: Path) -> None:
    """Issue 42: a candidate right on the listed shape only is not accepted, and the generator is told that a held-out
    shape failed, never which sizes, values or seed."""
    from kforge_bot.agents.generator import HELD_OUT_FEEDBACK
    from tests.evaluate.test_heldout_attacks import CANDIDATES, write_problem

    spec = write_problem(tmp_path / "k", "manifest", "rownorm")
    chunked = "import torch\n\n\ndef kernel(x):\n" + "".join(
        f"    {line}\n" for line in CANDIDATES[("rownorm", "chunks256")].splitlines())
    report = tmp_path / "report"
    with ScriptedLLMServer([reply(ADVICE_A), reply(fenced(chunked)), reply(fenced(chunked)), reply(ADVICE_A)],
                           api_key="test-key") as server:
        config = RunConfig(target="cpu", budgets=Budgets(iterations=2, tokens=10**7),
                           settings=EvalSettings(seeds=1, timing_budget_s=0.3, timeout_s=120),
                           endpoint=Endpoint(server.base_url, "test-key", "kforge-test-model"))
        run = OptimizeRun.open(spec, config, report)
        outcome = run.run()
        run.finish()
        prompts = server.prompts()
    first = outcome.record.iterations[1]
    assert first.verdict == "incorrect" and first.reason.startswith("held-out variant"), first.reason
    assert outcome.record.best is None or outcome.record.best.iteration != 1
    label = first.reason.split(":", 1)[0]  # 'held-out variant 1 (rows=67, cols=1001; inputs x2.50+0.70, ...) seed N'
    secrets = [label, label.rsplit(" seed ", 1)[1]] + re.findall(r"(?:rows|cols)=\d+", label)
    assert HELD_OUT_FEEDBACK in prompts[2]
    for secret in secrets:
        assert secret not in prompts[2], secret
