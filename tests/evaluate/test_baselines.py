"""Baselines eager and torch.compile on the CPU (inductor's C++ backend, g++): the compiled baseline checked like a
candidate, dropped with its verdict when it is wrong or fails to compile, and the speedups against each baseline."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from kforge_bot.config.choices import BASELINE_KINDS, EAGER
from kforge_bot.evaluate import baselines
from kforge_bot.evaluate.session import EvaluationSession
from kforge_bot.evaluate.baselines import (CompiledBaseline, against_baselines, compile_settings,
                                           compiled_implementation, measure_compiled)
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.evaluate.static_scan import static_findings
from kforge_bot.kernelspec import load_spec

DATA = Path(__file__).parents[1] / "data" / "baselines"
CHECK = EvalSettings(seeds=2, measure=False, profile=False, timeout_s=240)

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="torch.compile on the CPU needs g++ (inductor)")


def _timed(per_shape: dict[int, tuple[float, tuple[float, float]]]) -> EvalResult:
    return EvalResult(verdict="pass", reason="", target="cpu", details={"timing": [
        {"shape_set": s, "speedup": v, "speedup_ci": list(ci), "candidate": {"median_ms": 1.0}}
        for s, (v, ci) in per_shape.items()]})


def test_speedups_against_eager_compile_and_the_faster_of_the_two() -> None:
    candidate = _timed({0: (2.0, (1.8, 2.2)), 1: (1.5, (1.4, 1.6))})
    # torch.compile is 4x eager on shape set 0 (the candidate loses to it there) and 0.5x on shape set 1
    compiled = CompiledBaseline.from_result("compile", _timed({0: (4.0, (3.6, 4.4)), 1: (0.5, (0.45, 0.55))}))
    out = against_baselines(candidate, {"compile": compiled})
    assert out["eager"]["speedup"] == pytest.approx(math.sqrt(2.0 * 1.5))
    against = out["compile"]["against"]
    assert [p["speedup"] for p in against["per_shape"]] == pytest.approx([0.5, 3.0])
    assert against["per_shape"][0]["speedup_ci"] == pytest.approx([1.8 / 4.4, 2.2 / 3.6])  # both runs' intervals
    best = out["best"]
    assert best["faster_of"] == {"0": "compile", "1": "eager"}
    assert [p["speedup"] for p in best["per_shape"]] == pytest.approx([0.5, 1.5])
    assert best["speedup"] == pytest.approx(math.sqrt(0.5 * 1.5))
    assert out["compile"]["used"] and best["baselines"] == ["eager", "compile"]


def test_a_dropped_compiled_baseline_gives_no_figure_and_the_best_is_eager() -> None:
    candidate = _timed({0: (2.0, (1.8, 2.2))})
    wrong = CompiledBaseline.from_result("compile", EvalResult(verdict="incorrect", reason="output 0: wrong",
                                                               target="cpu"))
    out = against_baselines(candidate, {"compile": wrong})
    assert not out["compile"]["used"] and "against" not in out["compile"]
    assert out["compile"]["reason"] == "dropped: the compile baseline is incorrect: output 0: wrong"
    assert out["best"]["baselines"] == ["eager"] and out["best"]["speedup"] == pytest.approx(2.0)


def test_the_compiled_implementation_is_the_baseline_under_torch_compile() -> None:
    spec = load_spec(DATA / "scale.py")
    impl = compiled_implementation(spec.baseline, "compile-max-autotune")
    assert impl.source.startswith(spec.baseline.source) and impl.symbol == "_KforgeCompiled"
    assert "mode='max-autotune-no-cudagraphs'" in impl.source and impl.root == spec.baseline.root
    assert static_findings(impl.source) == []  # the harness's own wrapper passes the candidates' scan
    settings = compile_settings(CHECK)
    assert settings.allow_framework_fallback and settings.stall_floor_s == CHECK.timeout_s


@pytest.mark.slow
@needs_gxx
def test_a_compiled_baseline_that_is_wrong_is_reported_and_dropped() -> None:
    spec = load_spec(DATA / "wrong_when_compiled.py")
    with EvaluationSession("cpu") as session:
        found = measure_compiled(spec, spec.baseline, ["compile"], session.evaluate, CHECK)["compile"]
    assert found.verdict == "incorrect" and not found.usable, found.reason
    assert found.reason.startswith("dropped: the compile baseline is incorrect: shape set 0 seed ")


@pytest.mark.slow
@needs_gxx
def test_a_baseline_that_fails_to_compile_is_reported_and_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "/bin/false")  # inductor's C++ compiler: every compile of the CPU backend fails
    spec = load_spec(DATA / "scale.py")
    with EvaluationSession("cpu") as session:
        found = measure_compiled(spec, spec.baseline, ["compile"], session.evaluate, CHECK)["compile"]
    assert found.verdict == "compile_error" and not found.usable, found.reason
    assert "dropped: the compile baseline is compile_error: " in found.reason and "C++ compiler" in found.reason


def test_the_policy_s_baseline_words_are_the_harness_s_kinds() -> None:
    """The policy and the flags accept the words of kforge_bot.config.choices; each must be one the harness times."""
    assert BASELINE_KINDS == (EAGER, *baselines.COMPILE_MODES)
