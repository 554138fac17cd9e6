"""`kforge-bot optimize` as a user runs it: the real command in a child process (or in-process for usage
errors), the built-in tuner without an endpoint, the LLM loop against a scripted server on loopback."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from fakes.llm_server import Die, ScriptedLLMServer, reply

from kforge_bot.cli import main
from kforge_bot.optimize.trajectory import Trajectory, sha256

REPO = Path(__file__).resolve().parents[2]
ADVICE = "Recommendations:\n1. Raise TILE_N from 32 to 64 so the inner loop vectorizes."


@pytest.fixture
def quick_policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yml"
    path.write_text("evaluation:\n  seeds: 2\n  timing_budget_s: 0.5\n  timeout_s: 120\n")
    return path


@pytest.fixture
def steady_policy(tmp_path: Path) -> Path:
    """Twice the timing of quick_policy, for tests that need TILE_N 64 accepted (a confident speedup): with
    0.5 s a busy CI host once put its interval's lower end below 1."""
    path = tmp_path / "steady.yml"
    path.write_text("evaluation:\n  seeds: 2\n  timing_budget_s: 1.0\n  timeout_s: 120\n")
    return path


def no_llm_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KFORGE_MODEL"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "200"  # one progress line per step, unwrapped
    env.setdefault("KFORGE_CACHE_DIR", tempfile.mkdtemp(prefix="kforge-test-cache-"))  # never the user's cache
    return env


def kforge(*args: str | Path, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kforge_bot.cli", *map(str, args)], capture_output=True, text=True,
                          env=no_llm_env(), cwd=str(REPO), timeout=timeout)


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    captured = capsys.readouterr()
    return int(exc.value.code or 0), captured.out + captured.err


# ---------------------------------------------------------------------------------- usage errors (fast)


def test_usage_errors_exit_2_with_one_line(kernel_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "KFORGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    manifest = str(kernel_dir / "kforge.yaml")
    code, out = run_main(["optimize", manifest, "--out", str(tmp_path / "x.py"), "--write"], capsys)
    assert code == 2 and "--out and --write exclude each other" in out
    problem = str(REPO / "examples" / "kernelbench" / "softmax_problem.py")
    code, out = run_main(["optimize", problem, "--write"], capsys)
    assert code == 2 and "softmax_problem.py" in out and "--out" in out
    code, out = run_main(["optimize", manifest, "--resume", str(tmp_path)], capsys)
    assert code == 2 and "no trajectory.jsonl here" in out
    bad_policy = tmp_path / "bad.yml"
    bad_policy.write_text("budgets:\n  iterations: 0\n")
    code, out = run_main(["optimize", manifest, "--policy", str(bad_policy)], capsys)
    assert code == 2 and "bad.yml" in out and "budgets.iterations" in out


def test_resume_refuses_another_mode_or_a_changed_kernel(kernel_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "KFORGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    source = (kernel_dir / "tiny_mm.py").read_text()
    run = Trajectory.create(tmp_path / "run")
    run.append("start", schema=1, kernel="tiny_mm", kernel_file="tiny_mm.py", mode="tuner", target="cpu",
               baseline_file=run.write_source("baseline.py", source), baseline_sha256=sha256(source))
    manifest = str(kernel_dir / "kforge.yaml")
    code, out = run_main(["optimize", manifest, "--report", str(tmp_path / "run")], capsys)
    assert code == 2 and "already holds a run" in out and "--resume" in out
    code, out = run_main(["optimize", manifest, "--resume", str(tmp_path / "run"), "--base-url",
                          "http://127.0.0.1:9/v1"], capsys)
    assert code == 2 and "this run used the built-in tuner" in out
    (kernel_dir / "tiny_mm.py").write_text(source.replace("THREADS = 1", "THREADS = 3"))
    code, out = run_main(["optimize", manifest, "--resume", str(tmp_path / "run")], capsys)
    assert code == 2 and "tiny_mm.py changed since this run started" in out


@pytest.mark.parametrize("case", ["--write read-only checkout", "--out unwritable folder",
                                  "--report under unreadable folder", "--report unwritable folder",
                                  "kernel syntax error"])
def test_a_failure_the_user_causes_is_one_line_before_any_work(case: str, kernel_dir: Path, tmp_path: Path,
                                                               quick_policy: Path) -> None:
    if os.geteuid() == 0 and case != "kernel syntax error":
        pytest.skip("root writes through permissions: run as a plain user (kforge-ci)")
    locked = tmp_path / "locked"
    locked.mkdir()
    args: list[str | Path] = ["--report", tmp_path / "report"]
    if case == "--write read-only checkout":
        args = ["--write"]
        (kernel_dir / "tiny_mm.py").chmod(0o444)
        kernel_dir.chmod(0o555)
    elif case == "--out unwritable folder":
        args += ["--out", locked / "faster.py"]
        locked.chmod(0o555)
    elif case == "--report under unreadable folder":
        args = ["--report", locked / "inner" / "report"]
        locked.chmod(0o000)
    elif case == "--report unwritable folder":
        args = ["--report", locked]
        locked.chmod(0o555)
    else:
        path = kernel_dir / "tiny_mm.py"
        path.write_text(path.read_text().replace("def ", "def (", 1))
    try:
        started = time.monotonic()
        proc = kforge("optimize", kernel_dir / "kforge.yaml", "--policy", quick_policy, *args)
        took = time.monotonic() - started
    finally:
        kernel_dir.chmod(0o755)
        locked.chmod(0o755)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out
    [line] = [x for x in proc.stderr.splitlines() if x.strip()]
    expected = {"--write read-only checkout": "(--write)", "--out unwritable folder": "(--out)",
                "--report under unreadable folder": "report", "--report unwritable folder": "report",
                "kernel syntax error": "syntax error"}[case]
    assert line.startswith("kforge-bot: error:") and expected in line, line
    assert "evaluating" not in out and took < 30  # refused before the baseline's evaluation


# ---------------------------------------------------------------------------------- whole runs (slow)


@pytest.mark.slow
def test_without_an_endpoint_the_tuner_writes_a_verified_faster_kernel(kernel_dir: Path, tmp_path: Path,
                                                                      steady_policy: Path) -> None:
    original = (kernel_dir / "tiny_mm.py").read_text()
    out, report = tmp_path / "faster.py", tmp_path / "report"
    # steady: TILE_N 64 must be accepted (a confident speedup), which 0.5 s of timing missed beside busy loops
    proc = kforge("optimize", kernel_dir / "kforge.yaml", "--iterations", "1", "--out", out, "--report", report,
                  "--policy", steady_policy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "built-in tuner" in proc.stdout and "no LLM endpoint configured" in proc.stdout
    assert "[1/1] TILE_N 32->64: pass" in proc.stdout and "new best" in proc.stdout
    assert "TILE_N = 64" in out.read_text() and out.read_text() != original
    assert (kernel_dir / "tiny_mm.py").read_text() == original  # --out leaves the kernel alone
    lines = [json.loads(line) for line in (report / "trajectory.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in lines]
    assert kinds[:2] == ["start", "session"] and kinds[-1] == "end" and "result" in kinds
    # The roofline's traffic, counted by the baseline's evaluation: fp32 a (128x128), w (128x128) and bias
    # (128) read once, out (128x128) written once; its FLOPs, the profiler's count of the reference
    # (relu(a @ w + bias)): the matmul's 2*128^3 and the bias add's 128^2.
    workload = next(e for e in lines if e["event"] == "workload")
    assert workload["shape_sets"] == [{"bytes": (2 * 128 * 128 + 128) * 4 + 128 * 128 * 4,
                                       "input_bytes": (2 * 128 * 128 + 128) * 4, "output_bytes": 128 * 128 * 4,
                                       "flops": 2 * 128 ** 3 + 128 ** 2}]
    assert lines[-1]["written_to"] == str(out)
    text = (report / "report.md").read_text()
    assert "x faster** than the kernel as written" in text and f"Written to `{out}`" in text


@pytest.mark.slow
def test_llm_run_that_finds_nothing_better_leaves_the_kernel_untouched(kernel_dir: Path, tmp_path: Path,
                                                                       quick_policy: Path) -> None:
    original = (kernel_dir / "tiny_mm.py").read_text()
    call = "_LIB.mm_bias_relu(a.data_ptr(), w.data_ptr(), bias.data_ptr(), out.data_ptr(), M, N, K, THREADS)"
    slower = original.replace(call, f"{call}\n    {call}")  # correct, and twice the work
    report = tmp_path / "report"
    with ScriptedLLMServer([reply(ADVICE, prompt_tokens=100, completion_tokens=50),
                            reply(f"```python\n{slower}```", prompt_tokens=100, completion_tokens=50)],
                           api_key="sk-test-secret") as server:
        proc = kforge("optimize", kernel_dir / "tiny_mm.py", "--write", "--iterations", "5", "--budget-tokens", "200",
                      "--report", report, "--policy", quick_policy, "--base-url", server.base_url,
                      "--api-key", "sk-test-secret", "--model", "kforge-test-model")
        assert len(server.chat_requests) == 2
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "LLM generator and analyst, kforge-test-model at http://127.0.0.1" in proc.stdout
    assert "[1/5] pass" in proc.stdout and "tokens 300/200" in proc.stdout
    assert "token budget spent (300 of 200)" in proc.stdout
    assert "no candidate beat the kernel as written" in proc.stdout
    assert (kernel_dir / "tiny_mm.py").read_text() == original
    text = (report / "report.md").read_text()
    assert "No candidate beat the kernel as written" in text and "left untouched" in text
    # The endpoint's URL as the start event recorded it, the model named once.
    assert f"| LLM generator and analyst: kforge-test-model at {server.base_url} |" in text
    for path in (report / "trajectory.jsonl", report / "report.md"):
        assert "sk-test-secret" not in path.read_text()
    assert "sk-test-secret" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("case", ["bad key", "refused", "unknown model"])
def test_a_wrong_endpoint_key_or_model_exits_2_in_seconds_before_any_evaluation(case: str, kernel_dir: Path,
                                                                                tmp_path: Path, quick_policy: Path) -> None:
    with ScriptedLLMServer([], api_key="the-right-key", strict_models=True) as server:
        url = "http://127.0.0.1:9/v1" if case == "refused" else server.base_url
        key = "a-wrong-key" if case == "bad key" else "the-right-key"
        model = ["--model", "no-such-model"] if case == "unknown model" else []
        started = time.monotonic()
        proc = kforge("optimize", kernel_dir / "kforge.yaml", "--report", tmp_path / "report", "--policy",
                      quick_policy, "--base-url", url, "--api-key", key, *model)
        took = time.monotonic() - started
        # At most the check's 1-token request (a name the list lacks: the server decides); no kernel asked for.
        assert all(body["max_tokens"] == 1 for body in server.chat_requests)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert took < 30 and "Traceback" not in proc.stdout + proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("Error")] or [proc.stderr.strip()]
    assert {"bad key": "check OPENAI_API_KEY", "refused": "cannot reach",
            "unknown model": "does not serve model 'no-such-model'"}[case] in line, proc.stderr
    assert not (tmp_path / "report").exists()  # nothing evaluated, no run started


@pytest.mark.slow
def test_parallel_tuner_rounds_through_a_two_slot_pool_then_cache_hits(kernel_dir: Path, tmp_path: Path,
                                                                       quick_policy: Path) -> None:
    cache = tmp_path / "cache"
    report = tmp_path / "report"
    proc = kforge("optimize", kernel_dir / "kforge.yaml", "--target", "cpu", "--parallel", "2", "--workers", "2",
                  "--iterations", "2", "--policy", quick_policy, "--report", report, "--cache-dir", cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "evaluation pool (local): 2 slot(s)" in proc.stdout
    trajectory = Trajectory.open(report)
    record = trajectory.record
    its = record.completed
    assert [it.round for it in its] == [1, 1]  # one round of two distinct assignments
    assert len({it.sha256 for it in its}) == 2 and all(it.assignment for it in its)
    slots = {it.result["details"]["pool"]["slot"] for it in its}
    assert slots <= {0, 1} and all(it.loop_s is not None and it.loop_s < it.eval_s for it in its)
    assert "[round 1]" in proc.stdout
    assert "Round" in (report / "report.md").read_text()
    first = {it.sha256: it.verdict for it in its}

    # The same candidates again, on the same machine: every result comes from the cache, nothing is re-timed.
    again = tmp_path / "again"
    proc = kforge("optimize", kernel_dir / "kforge.yaml", "--target", "cpu", "--parallel", "2", "--iterations", "2",
                  "--policy", quick_policy, "--report", again, "--cache-dir", cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = Trajectory.open(again).record
    assert all(it.cached and it.eval_s == 0.0 for it in record.completed)
    assert {it.sha256: it.verdict for it in record.completed} == first
    assert record.baseline and record.baseline["cached"]
    assert "(cache hit)" in proc.stdout and "result cache: 3 hit(s), 0 miss(es)" in proc.stdout


# ---------------------------------------------------------------------------------- parallel LLM rounds (slow)


def agent_of(body: dict) -> str:
    """Which agent sent a chat request, by its system prompt."""
    system = body["messages"][0]["content"]
    if "performance-analysis agent" in system:
        return "analyst"
    assert "expert performance engineer" in system, system[:200]
    return "generator"


def fenced(source: str) -> str:
    return f"Here is the whole file.\n\n```python\n{source}```\n"


def variants(original: str) -> dict[str, str]:
    head = "    a, w, bias = a.contiguous(), w.contiguous(), bias.contiguous()\n"
    store = "out[(long)(i0 + i) * N + j0 + j] = v > 0.0f ? v : 0.0f;"
    assert head in original and store in original and "TILE_N = 32  # kforge" in original
    return {
        # Compiles and imports fine, then dies of a segfault the first time it is called.
        "crash": original.replace(head, "    import ctypes\n    ctypes.string_at(0)\n" + head),
        "faster": original.replace("TILE_N = 32  # kforge", "TILE_N = 64  # kforge"),  # about 2x on one core
        "wrong": original.replace(store, "out[(long)(i0 + i) * N + j0 + j] = v;"),  # forgot the relu
    }


@pytest.mark.slow
def test_parallel_llm_round_survives_a_crashing_candidate_and_the_analyst_sees_both(
        kernel_dir: Path, tmp_path: Path, steady_policy: Path) -> None:
    kinds = variants((kernel_dir / "tiny_mm.py").read_text())
    report = tmp_path / "report"
    after = "Recommendations:\n1. Keep TILE_N = 64 and try THREADS = 2."
    with ScriptedLLMServer([reply(ADVICE), reply(fenced(kinds["crash"])), reply(fenced(kinds["faster"])),
                            reply(after)], models=("model-a", "model-b"), api_key="sk-test") as server:
        proc = kforge("optimize", kernel_dir / "kforge.yaml", "--target", "cpu", "--parallel", "2", "--workers", "2",
                      "--iterations", "2", "--policy", steady_policy, "--report", report, "--no-cache",
                      "--base-url", server.base_url, "--api-key", "sk-test", "--model", "model-a", "--model", "model-b")
        bodies = server.chat_requests
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "evaluation pool (local): 2 slot(s)" in proc.stdout
    assert [agent_of(b) for b in bodies] == ["analyst", "generator", "generator", "analyst"], proc.stdout
    # The round's two requests went to the two models, one each.
    assert [bodies[1]["model"], bodies[2]["model"]] == ["model-a", "model-b"]
    assert bodies[3]["model"] == "model-a"  # the analyst keeps the run's first model, not the last sample's

    record = Trajectory.open(report).record
    crashed, good = record.iterations[1], record.iterations[2]
    assert (crashed.round, good.round) == (1, 1) and (crashed.model, good.model) == ("model-a", "model-b")
    assert crashed.verdict == "crash" and "SIGSEGV" in crashed.reason and not crashed.accepted
    assert good.verdict == "pass" and good.accepted and good.speedup_ci is not None and good.speedup_ci[0] > 1.0
    assert record.best is good and (report / "best.py").read_text() == kinds["faster"]
    assert {it.result["details"]["pool"]["slot"] for it in (crashed, good)} <= {0, 1}
    # The analyst, asked once after the round, reads the accepted candidate and both results of the round.
    final = "\n".join(m["content"] for m in bodies[3]["messages"])
    tried = final.split("## Already tried", 1)[1]
    assert "iteration 1: candidate: crash:" in tried and "SIGSEGV" in tried
    assert re.search(r"iteration 2: candidate: correct, \d+\.\d+x \(accepted\)", tried)
    assert "TILE_N = 64  # kforge" in final  # the profile and source of the new best, not the old one
    text = (report / "report.md").read_text()
    assert "| 1 | 1 | " in text and "| 2 | 1 | " in text and "(model model-a)" in text and "(model model-b)" in text
    assert "sk-test" not in (report / "trajectory.jsonl").read_text() + proc.stdout + proc.stderr


@pytest.mark.slow
def test_resume_judges_an_interrupted_rounds_candidates_without_asking_the_model_again(
        kernel_dir: Path, tmp_path: Path, steady_policy: Path) -> None:
    from kforge_bot.agents.llm import Endpoint
    from kforge_bot.evaluate.wire.result import EvalSettings
    from kforge_bot.config.policy import Budgets
    from kforge_bot.optimize.run import OptimizeRun, RunConfig
    from kforge_bot.kernelspec import load_spec

    kinds = variants((kernel_dir / "tiny_mm.py").read_text())
    report = tmp_path / "report"
    with ScriptedLLMServer([reply(ADVICE), reply(fenced(kinds["faster"])), reply(fenced(kinds["wrong"]))],
                           api_key="sk-test") as server:
        # Session 1, in this process: Ctrl-C arrives right after the round wrote its second candidate.
        config = RunConfig(target="cpu", budgets=Budgets(iterations=2), endpoint=Endpoint(server.base_url, "sk-test",
                           "kforge-test-model"), parallel=2,
                           settings=EvalSettings(seeds=2, timing_budget_s=0.5, timeout_s=120))
        run = OptimizeRun.open(load_spec(kernel_dir / "kforge.yaml"), config, report)

        interrupted_at: list[float] = []

        def interrupt(event: dict) -> None:
            if event["event"] == "candidate" and event["iteration"] == 2:
                interrupted_at.append(time.monotonic())
                raise KeyboardInterrupt

        run.trajectory.listeners.append(interrupt)
        with pytest.raises(KeyboardInterrupt):
            run.run()
        # Candidate 1 was being evaluated (several seconds); the pool was aborted, not waited for.
        assert time.monotonic() - interrupted_at[0] < 4.0
        run.trajectory.listeners.remove(interrupt)
        run.finish(note="interrupted")
        record = Trajectory.open(report).record
        assert [(it.iteration, it.round, it.verdict) for it in record.pendings] == [(1, 1, "pending"), (2, 1, "pending")]
        assert record.stop and record.stop["kind"] == "Interrupted"
        asked = len(server.chat_requests)
        assert asked == 3

        # Session 2, as a user resumes it (without --parallel): the pending round is judged, nothing re-asked.
        server.push(reply("Recommendations:\n1. Try THREADS = 2."))
        proc = kforge("optimize", kernel_dir / "kforge.yaml", "--resume", report, "--iterations", "2", "--policy",
                      steady_policy, "--base-url", server.base_url, "--api-key", "sk-test", "--model",
                      "kforge-test-model")
        later = server.chat_requests[asked:]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [agent_of(b) for b in later] == ["analyst"]  # no generator request for the pending candidates
    tried = "\n".join(m["content"] for m in later[0]["messages"]).split("## Already tried", 1)[1]
    assert re.search(r"iteration 1: candidate: correct, \d+\.\d+x \(accepted\)", tried)
    assert "iteration 2: candidate: incorrect" in tried

    trajectory = Trajectory.open(report)
    record = trajectory.record
    assert [(it.iteration, it.round, it.verdict, it.accepted) for it in record.completed] == \
        [(1, 1, "pass", True), (2, 1, "incorrect", False)]
    candidates = [e for e in trajectory.events if e["event"] == "candidate"]
    results = [e for e in trajectory.events if e["event"] == "result"]
    assert [e["session"] for e in candidates] == [1, 1] and [e["session"] for e in results] == [2, 2]
    assert [e["round"] for e in results] == [1, 1]
    assert len([e for e in trajectory.events if e["event"] == "baseline"]) == 1
    text = (report / "report.md").read_text()
    assert "over 2 sessions" in text
    assert re.search(r"^\| 1 \| 1 \| .*\| pass \|.*\| yes \|", text, re.MULTILINE)
    assert re.search(r"^\| 2 \| 1 \| .*\| incorrect \|", text, re.MULTILINE)
    assert (report / "best.py").read_text() == kinds["faster"]


@pytest.mark.slow
def test_a_server_that_dies_mid_run_stops_it_with_a_resume_hint_and_loses_nothing(
        kernel_dir: Path, tmp_path: Path, quick_policy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-server killed while it writes iteration 2's reply: the run retries, stops, says how to go on, and the
    resumed run (a new server, another port) carries on from iteration 2 with iteration 1 as it was."""
    monkeypatch.setenv("KFORGE_LLM_ATTEMPTS", "2")  # one retry, not the default five (about 30 s of waiting)
    kinds = variants((kernel_dir / "tiny_mm.py").read_text())
    report = tmp_path / "report"
    with ScriptedLLMServer([reply(ADVICE), reply(fenced(kinds["wrong"])), Die(after_chars=40)]) as server:
        proc = kforge("optimize", kernel_dir / "kforge.yaml", "--iterations", "3", "--report", report, "--policy",
                      quick_policy, "--base-url", server.base_url, "--model", "kforge-test-model")
        assert server.died
    assert proc.returncode == 0, proc.stdout + proc.stderr  # an iteration ran: the report is a result
    out = proc.stdout
    assert "[1/3] incorrect" in out and "LLM endpoint" in out and "connection" in out
    hint = f"continue it: kforge-bot optimize {kernel_dir / 'kforge.yaml'} --resume {report}"
    assert f"the run so far is kept in {report}; once the endpoint answers again, {hint}" in out
    record = Trajectory.open(report).record
    assert [(it.iteration, it.verdict) for it in record.completed] == [(1, "incorrect")]
    assert record.stop and record.stop["kind"] == "LLMUnavailable"
    first = (report / "candidates" / "0001.py").read_text()

    with ScriptedLLMServer([reply(fenced(kinds["faster"])), reply(ADVICE)]) as again:
        proc = kforge("optimize", kernel_dir / "kforge.yaml", "--resume", report, "--iterations", "2", "--policy",
                      quick_policy, "--base-url", again.base_url, "--model", "kforge-test-model")
        asked = [agent_of(b) for b in again.chat_requests]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert asked[0] == "generator"  # iteration 2 is asked for again; the analyst's advice was kept
    assert "attempt 1: wrong results" in again.chat_requests[0]["messages"][1]["content"].lower()
    record = Trajectory.open(report).record
    assert [it.iteration for it in record.completed] == [1, 2]
    assert (report / "candidates" / "0001.py").read_text() == first


# ------------------------------------------------------------- a model on each format, end to end (slow)

# The kernels as written and the faster candidates work row by row: a whole-batch op enters torch's parallel region,
# whose time a busy 2-core host makes erratic (tens of milliseconds for one 64x512 softmax).
ROW_LOOP_SOFTMAX = "torch.stack([(row - row.max()).exp() / (row - row.max()).exp().sum() for row in x])"
PER_ROW_SOFTMAX = "torch.stack([torch.softmax(row, dim=0) for row in x])"
BROKEN_CALL = "softmax_rows_fused(x)"  # names nothing: the candidate's own NameError must reach the generator


def kernelbench_row_softmax(folder: Path) -> Path:
    """tests/data/kb/softmax.py with its Model written one row at a time, each row's exponentials computed twice
    (so a candidate can be confidently faster on a busy CPU): the loop once judged every candidate of a KernelBench
    problem as lacking Model."""
    source = (REPO / "tests" / "data" / "kb" / "softmax.py").read_text()
    slow = source.replace("return torch.softmax(x, dim=1)", f"return {ROW_LOOP_SOFTMAX}")
    assert slow != source
    folder.mkdir()
    (folder / "softmax.py").write_text(slow)
    return folder / "softmax.py"


def manifest_row_softmax(folder: Path) -> Path:
    folder.mkdir()
    (folder / "rowsoftmax.py").write_text(
        "import torch\n\n\ndef row_softmax(x):\n    return " + ROW_LOOP_SOFTMAX + "\n\n\n"
        "def make_inputs(rows, cols):\n    return (torch.randn(rows, cols),)\n")
    (folder / "kforge.yaml").write_text(
        "version: 1\nkernels:\n  rowsoftmax:\n    file: rowsoftmax.py\n    entry: row_softmax\n"
        "    inputs: rowsoftmax.py:make_inputs\n    shapes: [{rows: 64, cols: 512}]\n    targets: [cpu]\n")
    return folder / "kforge.yaml"


def gpumode_row_loop(folder: Path) -> Path:
    """tests/data/gpumode's scaled_add problem, its submission written one row at a time."""
    shutil.copytree(REPO / "tests" / "data" / "gpumode", folder)
    (folder / "scaled_add_py" / "submission.py").write_text(
        "import torch\nfrom task import input_t, output_t\n\n\ndef custom_kernel(data: input_t) -> output_t:\n"
        "    a, b, out = data\n    for i in range(a.shape[0]):\n        out[i] = torch.relu(a[i] + 2 * b[i])\n"
        "    return out\n")
    return folder / "scaled_add_py"


def candidates_of(fmt: str) -> tuple[str, str]:
    """(broken, faster) candidate sources a model writes for each format."""
    if fmt == "kernelbench":
        head = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
        return head + f"        return {BROKEN_CALL}\n", head + f"        return {PER_ROW_SOFTMAX}\n"
    if fmt == "manifest":
        head = "import torch\n\n\ndef row_softmax(x):\n"
        tail = "\n\ndef make_inputs(rows, cols):\n    return (torch.randn(rows, cols),)\n"
        return head + f"    return {BROKEN_CALL}\n" + tail, head + f"    return {PER_ROW_SOFTMAX}\n" + tail
    head = "import torch\nfrom task import input_t, output_t\n\n\ndef custom_kernel(data: input_t) -> output_t:\n"
    return (head + f"    a, b, out = data\n    return {BROKEN_CALL}\n",
            head + "    a, b, out = data\n    torch.add(a, b, alpha=2, out=out)\n    return out.clamp_(min=0)\n")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["kernelbench", "manifest", "gpumode"])
def test_a_model_improves_each_format_and_a_broken_candidate_s_own_error_reaches_it(
        fmt: str, tmp_path: Path, steady_policy: Path) -> None:
    problem = {"kernelbench": kernelbench_row_softmax, "manifest": manifest_row_softmax,
               "gpumode": gpumode_row_loop}[fmt](tmp_path / "problem")
    broken, faster = candidates_of(fmt)
    report, out = tmp_path / "report", tmp_path / "best.py"
    with ScriptedLLMServer([reply(ADVICE), reply(fenced(broken)), reply(fenced(faster)), reply(ADVICE)],
                           api_key="sk-test") as server:
        proc = kforge("optimize", problem, "--target", "cpu", "--iterations", "2", "--policy", steady_policy,
                      "--report", report, "--out", out, "--no-cache", "--base-url", server.base_url,
                      "--api-key", "sk-test", "--model", "kforge-test-model")
        bodies = server.chat_requests
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = Trajectory.open(report).record
    first, second = record.iterations[1], record.iterations[2]
    assert "NameError" in first.reason and "softmax_rows_fused" in first.reason, first.reason
    assert "defines no" not in first.reason
    # The generator's next request carries the candidate's real error, not the harness's.
    assert [agent_of(b) for b in bodies[:3]] == ["analyst", "generator", "generator"]
    repair = "\n".join(m["content"] for m in bodies[2]["messages"])
    assert "NameError" in repair and "softmax_rows_fused" in repair
    assert second.verdict == "pass" and second.accepted and record.best is second, second.reason
    assert out.read_text() == faster
