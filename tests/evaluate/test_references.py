"""The reference store: reference outputs computed once per key by a trusted worker, kept in the bot's memory."""

from __future__ import annotations

from pathlib import Path

from kforge_bot.evaluate.wire.plan import Fit, Plan
from kforge_bot.evaluate.references import ReferenceStore, _reference_death, reference_fit
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.evaluate.sandbox import WorkerOutcome
from kforge_bot.kernelspec import load_spec

ADV = Path(__file__).parents[1] / "data" / "adversarial"


def test_a_reference_killed_after_writing_gigabytes_is_named_as_host_memory_not_the_reference() -> None:
    written = [{"phase": "reference", "case": f"c{i}", "output_bytes": 6_400_000_000} for i in range(7)]
    why, hint = _reference_death(WorkerOutcome(returncode=-9, wall_s=80), written, cases=11)
    assert "killed (SIGKILL) after 7 of 11 cases had written 44.8 GB of outputs (6.4 GB a case)" in why
    assert "most likely out of host memory, not a fault of the reference" in why
    assert "--seeds 1" in hint and "141 GB" in hint  # 11 cases x 6.4 GB, in the worker and in this process
    # A small reference that dies is the reference's own failure, with its last words.
    why, hint = _reference_death(WorkerOutcome(returncode=1, log_tail="Traceback\nValueError: bad shape\n"),
                                 written[:1], cases=11)
    assert why == "exited with status 1 before reporting a result; its last words: ValueError: bad shape"
    assert hint.startswith("the reference and its inputs must run")


def test_one_reference_run_serves_every_evaluation_with_the_same_spec_target_and_seeds(tmp_path: Path) -> None:
    spec = load_spec(ADV / "problem.py")
    store = ReferenceStore(tmp_path)
    settings = EvalSettings(seeds=2)
    key = store.key(spec, "cpu", [1, 2], settings)
    assert key == ReferenceStore(tmp_path / "other").key(spec, "cpu", [1, 2], EvalSettings(seeds=2, timeout_s=9))
    assert key != store.key(spec, "cpu", [1, 3], settings)
    assert key != store.key(spec, "cuda", [1, 2], settings)
    assert key != store.key(spec, "cpu", [1, 2], EvalSettings(seeds=2, rotate_sets=1))  # other timed sets


def test_the_fit_is_the_reference_workers_word_or_the_whole_plan(tmp_path: Path) -> None:
    spec = load_spec(ADV / "problem.py")
    plan = Plan(role="candidate", target="cpu", spec=spec, baseline=spec.baseline, candidate=None,
                settings=EvalSettings(rotate_sets=3), seeds=[1, 2, 3], out_dir=tmp_path)
    assert plan.fitted(reference_fit({"status": "ok"})) is plan  # an older result without one: all of it
    kept = Fit(1, 2, "too large for 3 seeds", device_outputs=False)
    assert reference_fit({"status": "ok", "fit": kept.to_dict()}) == kept
