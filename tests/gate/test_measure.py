"""compare(): one kernel's measurements, driven by a scripted evaluate() (the real one runs in test_gate_run.py)."""

from __future__ import annotations

import pytest
from fakes.gate_repos import tiny_spec_in

from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.gate.measure import compare, confirmation_settings
from kforge_bot.kernelspec import Implementation


@pytest.fixture()
def tiny_spec(tmp_path):
    return tiny_spec_in(tmp_path)


class Scripted:
    """Stands in for evaluate() to drive compare()'s control flow with chosen results (the real
    evaluate is exercised by the repository tests below)."""

    def __init__(self, results: list[EvalResult]):
        self.results = list(results)
        self.calls: list[dict] = []

    def __call__(self, spec, candidate, target, settings, *, baseline=None, seeds=None, references=None):
        self.calls.append({"spec": spec, "candidate": candidate, "baseline": baseline, "settings": settings,
                           "seeds": seeds})
        return self.results.pop(0)


def timed(low: float, high: float) -> EvalResult:
    mid = (low + high) / 2
    return EvalResult(verdict="pass", reason="ok", target="cpu", speedup=mid, speedup_ci=(low, high))


def test_straddling_result_gets_one_confirmation_which_decides(tiny_spec):
    head = tiny_spec.baseline
    base = Implementation("def kernel(x, y):\n    return x * 2.0 + y\n", "kernel", "k.py")
    settings = EvalSettings(timing_budget_s=1.0, confidence=0.95)

    fake = Scripted([timed(0.95, 0.99), timed(0.955, 0.975)])
    m = compare(tiny_spec, head, base, "cpu", settings, 0.02, evaluator=fake)
    assert m.verdict == "regression" and m.first is not None and m.reason.startswith("confirmed")
    assert len(fake.calls) == 2
    assert fake.calls[1]["settings"].timing_budget_s == pytest.approx(3.0)
    assert fake.calls[1]["settings"] == confirmation_settings(fake.calls[0]["settings"])
    assert fake.calls[0]["seeds"] == fake.calls[1]["seeds"]  # one reference computation serves both runs

    fake = Scripted([timed(0.95, 0.99), timed(0.97, 0.995)])
    m = compare(tiny_spec, head, base, "cpu", settings, 0.02, evaluator=fake)
    assert m.verdict == "inconclusive" and "not resolved" in m.reason and not m.cacheable

    untimed = EvalResult(verdict="pass", reason="too few pairs", target="cpu", speedup=0.5, speedup_ci=None)
    fake = Scripted([untimed, untimed])  # no interval even after confirming: not judged, so not passed
    m = compare(tiny_spec, head, base, "cpu", settings, 0.02, evaluator=fake)
    assert m.verdict == "error" and "could not be timed" in m.reason and len(fake.calls) == 2

    fake = Scripted([timed(0.99, 1.01)])  # clear of the bound: no confirmation
    m = compare(tiny_spec, head, base, "cpu", settings, 0.02, evaluator=fake)
    assert m.verdict == "pass" and len(fake.calls) == 1


def crashed(side: str, verdict: str = "crash") -> EvalResult:
    return EvalResult(verdict=verdict, reason="RuntimeError: CUDA error: an illegal memory access", target="cpu",
                      details={"failed_side": side})


def test_a_crash_is_charged_to_the_side_whose_code_crashed_and_the_head_never_runs_alone(tiny_spec):
    """Attack (issue 28, class 4): the gate ran the head alone after a crash in the comparison and passed it, so a
    head that crashed in the comparison only (telling it apart by a module name) passed slower or wrong."""
    head = tiny_spec.baseline
    base = Implementation("def kernel(x, y):\n    return x * 2.0 + y\n", "kernel", "k.py")
    for verdict in ("crash", "timeout"):
        fake = Scripted([crashed("candidate", verdict), timed(0.98, 1.02)])
        m = compare(tiny_spec, head, base, "cpu", EvalSettings(), 0.02, evaluator=fake)
        assert m.verdict == "error" and "CUDA error" in m.reason, m.reason
        assert len(fake.calls) == 1  # no second run, alone or otherwise

    fake = Scripted([crashed("baseline"), timed(0.98, 1.02)])
    m = compare(tiny_spec, head, base, "cpu", EvalSettings(), 0.02, evaluator=fake)
    # The base's failure: not the head's verdict, and not a pass either (the two share a process).
    assert m.verdict == "error" and m.reason.startswith("the base version failed beside the head") and not m.cacheable
    assert len(fake.calls) == 1

    fake = Scripted([timed(0.95, 0.99), crashed("baseline")])  # in the confirmation run too
    m = compare(tiny_spec, head, base, "cpu", EvalSettings(), 0.02, evaluator=fake)
    assert m.verdict == "error" and m.reason.startswith("confirmation run: the base version failed")



def test_an_interval_straddling_the_threshold_after_confirmation_is_inconclusive_and_fails(tiny_spec):
    """Attack (issue 38, 3.3): an interval still straddling the threshold after the confirmation run (0.7x-7.7x)
    counted as a pass."""
    head = tiny_spec.baseline
    base = Implementation("def kernel(x, y):\n    return x * 2.0 + y\n", "kernel", "k.py")
    fake = Scripted([timed(0.7, 7.7), timed(0.7, 7.7)])
    m = compare(tiny_spec, head, base, "cpu", EvalSettings(), 0.02, evaluator=fake)
    assert m.verdict == "inconclusive" and "fails the gate" in m.reason, m.reason
    assert not m.cacheable and len(fake.calls) == 2
    # The policy's gate.inconclusive: pass lets it through, still never cached.
    fake = Scripted([timed(0.7, 7.7), timed(0.7, 7.7)])
    m = compare(tiny_spec, head, base, "cpu", EvalSettings(inconclusive="pass"), 0.02, evaluator=fake)
    assert m.verdict == "pass" and m.reason.startswith("inconclusive, passed by the policy") and not m.cacheable


def disturbed(low: float, high: float) -> EvalResult:
    result = timed(low, high)
    result.verdict, result.reason = "inconclusive", "timing disturbed: the baseline's samples were preempted"
    return result


def test_a_disturbed_timing_is_measured_once_more_and_decides_only_when_undisturbed(tiny_spec):
    head = tiny_spec.baseline
    base = Implementation("def kernel(x, y):\n    return x * 2.0 + y\n", "kernel", "k.py")
    fake = Scripted([disturbed(3.0, 9.0), timed(0.99, 1.01)])  # disturbed, then a clean pass
    m = compare(tiny_spec, head, base, "cpu", EvalSettings(), 0.02, evaluator=fake)
    assert m.verdict == "pass" and len(fake.calls) == 2
    assert m.result.details["disturbed_before"].startswith("timing disturbed")

    fake = Scripted([disturbed(3.0, 9.0), disturbed(3.0, 9.0)])  # disturbed twice: no verdict, fails by default
    m = compare(tiny_spec, head, base, "cpu", EvalSettings(), 0.02, evaluator=fake)
    assert m.verdict == "inconclusive" and m.reason.startswith("disturbed twice: timing disturbed") and not m.cacheable
    assert len(fake.calls) == 2

    fake = Scripted([timed(0.95, 0.99), disturbed(3.0, 9.0), disturbed(3.0, 9.0)])  # the confirmation, twice
    m = compare(tiny_spec, head, base, "cpu", EvalSettings(), 0.02, evaluator=fake)
    assert m.verdict == "inconclusive" and m.reason.startswith("confirmation run disturbed twice")
    assert len(fake.calls) == 3
