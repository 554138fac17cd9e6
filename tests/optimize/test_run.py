"""One optimize run as the commands start it (kforge_bot.optimize.run): what `open` refuses, the rules it
derives from the budgets, and how a resumed run checks it is the same run."""

from __future__ import annotations

from pathlib import Path

import pytest

from kforge_bot.config.policy import Budgets
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.optimize.run import OptimizeRun, RunConfig
from kforge_bot.optimize.trajectory import read_events
from kforge_bot.kernelspec import load_spec

SETTINGS = EvalSettings(seeds=2, timing_budget_s=0.5, timeout_s=120)


def test_a_kernel_in_a_language_the_policy_refuses_is_an_error_up_front(kernel_dir: Path, tmp_path: Path) -> None:
    """A manifest kernel declared in a refused language: none of its candidates could be accepted."""
    spec = load_spec(kernel_dir / "tiny_mm.py")
    config = RunConfig(target="cpu", settings=SETTINGS, languages=("triton", "cuda"))
    with pytest.raises(KforgeError) as caught:
        OptimizeRun.open(spec, config, tmp_path / "report")
    assert f"kernel {spec.name!r} is written in {spec.language}, and the policy allows candidates only in triton, " \
           "cuda" in str(caught.value)


def test_the_configured_patience_replaces_the_modes_own(kernel_dir: Path, tmp_path: Path) -> None:
    spec = load_spec(kernel_dir / "kforge.yaml")
    plain = OptimizeRun.open(spec, RunConfig(target="cpu", budgets=Budgets(iterations=1)), tmp_path / "a")
    patient = OptimizeRun.open(spec, RunConfig(target="cpu", budgets=Budgets(iterations=1, patience=20)), tmp_path / "b")
    assert plain.loop.rules.patience == 6 and patient.loop.rules.patience == 20  # the tuner's own is 6


def test_the_start_event_records_the_spending_limits_and_the_rules(kernel_dir: Path, tmp_path: Path) -> None:
    spec = load_spec(kernel_dir / "kforge.yaml")
    budgets = Budgets(iterations=3, tokens=None, time_limit_s=60.0, speed_of_light=0.7)
    OptimizeRun.open(spec, RunConfig(target="cpu", budgets=budgets, settings=SETTINGS), tmp_path / "run")
    start = read_events(tmp_path / "run" / "trajectory.jsonl")[0]
    assert start["event"] == "start" and start["mode"] == "tuner"
    assert start["budgets"] == {"iterations": 3, "tokens": None, "time_limit_s": 60.0}
    assert start["rules"] == {"patience": 6, "roofline_fraction": 0.9, "speed_of_light": 0.7, "min_gain": 0.01}


def test_a_resumed_run_must_be_the_same_kernel_target_and_mode(kernel_dir: Path, tmp_path: Path) -> None:
    spec = load_spec(kernel_dir / "kforge.yaml")
    OptimizeRun.open(spec, RunConfig(target="cpu", settings=SETTINGS), tmp_path / "run")
    with pytest.raises(KforgeError, match="measured on target 'cpu', not 'cuda'"):
        OptimizeRun.open(spec, RunConfig(target="cuda", settings=SETTINGS), tmp_path / "run", resume=True)
    (kernel_dir / "tiny_mm.py").write_text(spec.baseline.source + "\n# edited\n")
    with pytest.raises(KforgeError, match="tiny_mm.py changed since this run started"):
        OptimizeRun.open(load_spec(kernel_dir / "kforge.yaml"), RunConfig(target="cpu", settings=SETTINGS),
                         tmp_path / "run", resume=True)


def test_a_kernel_that_builds_an_extension_is_evaluated_through_a_pool_even_one_at_a_time(tmp_path: Path) -> None:
    """The pool builds the kernel as written once; bare evaluations would rebuild it in every candidate's worker."""
    from fakes.pool_kernels import KERNEL, spec_in

    from kforge_bot.scaleout.pool import EvalPool

    (tmp_path / "builds").mkdir()
    (tmp_path / "plain").mkdir()
    building = spec_in(tmp_path / "builds", "from torch.utils.cpp_extension import load_inline  # noqa: F401\n" + KERNEL)
    plain = spec_in(tmp_path / "plain")
    run = OptimizeRun.open(building, RunConfig(target="cpu", settings=SETTINGS), tmp_path / "a")
    try:
        assert isinstance(run.own_pool, EvalPool) and run.own_pool.size == 1
    finally:
        run.own_pool.close()
    assert OptimizeRun.open(plain, RunConfig(target="cpu", settings=SETTINGS), tmp_path / "b").own_pool is None


def test_the_endpoints_limits_reach_the_client(kernel_dir: Path, tmp_path: Path) -> None:
    """KFORGE_MAX_TOKENS and KFORGE_LLM_TIMEOUT (through the endpoint) are what the run's client sends and waits."""
    from kforge_bot.agents.llm import endpoint_from_env

    endpoint = endpoint_from_env(base_url="http://127.0.0.1:1/v1", model="m",
                                 env={"KFORGE_MAX_TOKENS": "777", "KFORGE_LLM_TIMEOUT": "901"})
    run = OptimizeRun.open(load_spec(kernel_dir / "kforge.yaml"), RunConfig(target="cpu", endpoint=endpoint),
                           tmp_path / "report")
    client = run.loop.proposer.client  # type: ignore[attr-defined]
    assert (client.timeout, client.endpoint.max_tokens) == (901.0, 777)
    run.evaluator.close()
