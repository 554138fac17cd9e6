"""The plan: which cases an evaluation runs, and how much of it a problem's size lets fit in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kforge_bot.evaluate.wire.plan import DoesNotFit, Fit, Plan, fit_plan, memory_needs
from kforge_bot.evaluate.wire.result import EvalSettings
from kforge_bot.kernelspec import load_spec

PROBLEM = Path(__file__).parents[1] / "data" / "adversarial" / "problem.py"
GB = 10**9


def _plan(seeds: int = 3, rotations: int = 3) -> Plan:
    spec = load_spec(PROBLEM)
    return Plan(role="reference", target="cuda", spec=spec, baseline=spec.reference, candidate=None,
                settings=EvalSettings(rotate_sets=rotations), seeds=list(range(1, seeds + 1)), out_dir=Path("/x"))


def test_a_small_gpu_problem_keeps_the_whole_plan_with_a_timed_set_for_each_call_of_a_sample() -> None:
    """A 25 us kernel is timed from CUDA graphs 8 calls a sample, each graph replayed once (a second replay could
    find its answer already written): 8 timed sets. On the H200 3 sets (3-call samples) missed a 1% slowdown in
    2 of 5 runs."""
    fit = fit_plan(_plan(), [64 << 20], [64 << 20], device_free=100 * GB, host_free=100 * GB)
    assert fit == Fit(3, EvalSettings().short_kernel_sets, "", device_outputs=False) and fit.rotate_sets == 8
    fitted = _plan().fitted(fit)
    assert fitted.settings.rotate_sets == 8 and len(fitted.timing_cases()) == 8 * len(fitted.spec.shape_sets)


def test_a_problem_too_large_for_short_calls_or_not_on_a_gpu_keeps_the_timed_sets_asked_for() -> None:
    # 300 MB in and out: at least 75 us a call even at 8 TB/s, never more than 3 calls a sample.
    larger = fit_plan(_plan(), [300 * 10**6], [300 * 10**6], device_free=100 * GB, host_free=100 * GB)
    assert larger == Fit(3, 3, "", device_outputs=False)  # as asked: no note of a cut
    cpu = Plan(**{**_plan().__dict__, "target": "cpu"})
    assert fit_plan(cpu, [64 << 20], [64 << 20], None, host_free=100 * GB) == Fit(3, 3, "", device_outputs=False)
    # Where the short-kernel sets do not fit, the sets asked for do, without a note.
    tight = fit_plan(_plan(), [400 << 20], [64 << 20], device_free=12 * GB, host_free=100 * GB)
    assert tight == Fit(3, 3, "", device_outputs=False)


def test_a_large_problem_is_cut_to_one_seed_and_fewer_timed_sets_and_says_why() -> None:
    # KernelBench level 1 GELU: 6.4 GB in, 6.4 GB out, on an H200 host (139 GB device, ~120 GB host free).
    plan = _plan()
    # Base and head timed in workers of their own, the base's holding its own timed sets: one timed set (one
    # worker alone kept two).
    fit = fit_plan(plan, [int(6.4 * GB)], [int(6.4 * GB)], device_free=139 * GB, host_free=120 * GB)
    assert (fit.seeds, fit.rotate_sets) == (1, 1)
    assert "cut to 1 seed(s) and 1 timed input set(s)" in fit.note and "inputs 6.4 GB, outputs 6.4 GB" in fit.note
    small = plan.fitted(fit)
    assert small.seeds == [1] and small.settings.rotate_sets == 1
    device, host = memory_needs(small, [int(6.4 * GB)], [int(6.4 * GB)])
    assert device <= 0.8 * 139 * GB and host <= 0.7 * 120 * GB
    # The first seed of each shape set, which the reference computes before it knows the sizes, stays.
    assert small.correctness_cases()[0].ref_file == plan.correctness_cases()[0].ref_file


def test_a_problem_that_cannot_fit_names_its_sizes_and_the_memory() -> None:
    with pytest.raises(DoesNotFit) as caught:
        fit_plan(_plan(), [40 * GB], [40 * GB], device_free=139 * GB, host_free=120 * GB)
    text = str(caught.value)
    assert text.startswith("inputs of 40.0 GB and outputs of 40.0 GB per set need about ")
    assert "even with one seed and one timed input set" in text
    assert "139.0 GB of device memory free and 120.0 GB of host memory available" in text


def test_on_the_cpu_device_and_host_share_one_budget() -> None:
    # 8 MB in and out: 320 MB for the full plan on a CPU, 144 MB for one seed and one timed set.
    plan = Plan(**{**_plan(seeds=2).__dict__, "target": "cpu"})
    size = [8 << 20]
    assert fit_plan(plan, size, size, None, host_free=1 << 32) == Fit(2, 3, "", device_outputs=False)
    cut = fit_plan(plan, size, size, None, host_free=300 << 20)
    assert (cut.seeds, cut.rotate_sets) == (1, 1) and "about " in cut.note and "device memory" not in cut.note
    with pytest.raises(DoesNotFit):
        fit_plan(plan, size, size, None, host_free=150 << 20)


def test_outputs_stay_on_the_device_where_they_fit_and_go_through_the_host_where_they_do_not() -> None:
    """Measured on the H200 (2026-12-02, base and head in one worker): GELU (6.4 GB in and out) with its outputs
    on the device, one seed and one timed set, 8.3 s; RMSNorm (7.5 GB) needed 127.8 GB of device memory that way,
    over the 0.8 x 149.5 GB budget, and kept its verdict only by sending the outputs through the host. With the
    base's worker holding its own timed sets, GELU's outputs go through the host too, and RMSNorm fits no more."""
    plan = _plan()
    small = fit_plan(plan, [64 << 20], [64 << 20], device_free=149 * GB, host_free=133 * GB, device_outputs=True)
    assert small == Fit(3, 8, "", device_outputs=True)
    gelu = fit_plan(plan, [int(6.4 * GB)], [int(6.4 * GB)], device_free=int(149.5 * GB), host_free=133 * GB,
                    device_outputs=True)
    assert (gelu.seeds, gelu.rotate_sets, gelu.device_outputs) == (1, 1, False)
    assert "outputs pass through host memory" in gelu.note
    assert " 0.0 MB of host memory" not in gelu.note  # the full plan's needs on the path taken (host)
    device, host = memory_needs(plan.fitted(gelu), [int(6.4 * GB)], [int(6.4 * GB)], device_outputs=False)
    assert device <= 0.8 * 149.5 * GB and host <= 0.7 * 133 * GB
    with pytest.raises(DoesNotFit, match="inputs of 7.5 GB and outputs of 7.5 GB per set need about 120.0 GB"):
        fit_plan(plan, [int(7.5 * GB)], [int(7.5 * GB)], device_free=int(149.5 * GB), host_free=133 * GB,
                 device_outputs=True)
    # Untimed (correctness only), one worker holds everything: RMSNorm's outputs stay on the device.
    untimed = Plan(**{**plan.__dict__, "settings": EvalSettings(measure=False)})
    rmsnorm = fit_plan(untimed, [int(7.5 * GB)], [int(7.5 * GB)], device_free=int(149.5 * GB), host_free=133 * GB,
                       device_outputs=True)
    assert (rmsnorm.seeds, rmsnorm.device_outputs) == (3, True)


def test_a_fit_says_where_the_outputs_go_across_the_pipe() -> None:
    fit = Fit(1, 1, "why", device_outputs=False)
    assert Fit.from_dict(fit.to_dict()) == fit
    assert Fit.from_dict({}).device_outputs  # an older reference result: the sink decides


# ------------------------------------------------------------------------------------ the cases


def test_correctness_cases_cover_every_shape_set_and_seed_and_refill_the_first_seeds_buffers() -> None:
    plan = _plan(seeds=3)
    cases = plan.correctness_cases()
    shapes = len(plan.spec.shape_sets)
    assert len(cases) == 3 * shapes
    assert [(c.shape, c.seed) for c in cases[:3]] == [(0, 1), (0, 2), (0, 3)]
    first, second = cases[0], cases[1]
    assert first.reuse_seed == 2 and first.reuse_file == "cand_0_0_reuse.out" and first.reuse_ref_file == "ref_0_1.out"
    assert second.reuse_seed is None and second.reuse_file is None  # only the first seed's buffers are refilled
    assert len({c.cand_file for c in cases}) == len(cases)  # every output lands in its own file
    one_seed = _plan(seeds=1).correctness_cases()
    assert all(c.reuse_seed is None for c in one_seed)  # nothing to refill with


def test_timed_sets_have_secret_distinct_seeds_and_cases_follow_the_settings() -> None:
    plan = _plan(seeds=3, rotations=3)
    shapes = len(plan.spec.shape_sets)
    timed = plan.timing_cases()
    assert len(timed) == 3 * shapes and len(plan.changed_cases()) == 3 * shapes and len(plan.moved_cases()) == 3 * shapes
    assert {c.seed for c in timed}.isdisjoint(plan.seeds)  # timed outputs are checked on inputs never seen before
    assert len({c.seed for c in timed}) == len(timed)
    other = Plan(**{**plan.__dict__, "seeds": [7, 8, 9]})
    assert [c.seed for c in other.timing_cases()] != [c.seed for c in timed]  # keyed by the correctness seeds
    moved = plan.moved_cases()[0]
    assert moved.seed == plan.timing_seed(0, 1) and moved.ref_file == plan.timed_ref_file(0, 1)
    assert all(c.perturbed for c in plan.changed_cases())
    assert plan.all_cases() == plan.correctness_cases() + timed + plan.changed_cases()
    reuse = sum(1 for c in plan.correctness_cases() if c.reuse_file)
    assert plan.candidate_outputs() == len(plan.all_cases()) + reuse + len(plan.moved_cases())

    unmeasured = Plan(**{**plan.__dict__, "settings": EvalSettings(measure=False)})
    assert unmeasured.timing_cases() == unmeasured.changed_cases() == unmeasured.moved_cases() == []
    single = Plan(**{**plan.__dict__, "settings": EvalSettings(rotate_sets=1)})
    assert single.moved_cases() == [] and len(single.timing_cases()) == shapes  # nothing to move between


def test_a_plan_and_a_fit_round_trip_through_json() -> None:
    plan = _plan()
    plan.await_fit, plan.threads, plan.init_seed = True, 4, 99
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan and again.all_cases() == plan.all_cases()
    fit = Fit(1, 2, "cut")
    assert Fit.from_dict(fit.to_dict()) == fit
    assert Fit.from_dict({}) == Fit(0, 0)  # no counts: the plan keeps its own
    assert plan.fitted(Fit.from_dict({})) is plan


def test_a_fit_outside_the_plan_is_refused() -> None:
    """The fit reaches the candidate's worker on its stdin, which the candidate's import can write to: a count
    the plan cannot have (negative; more seeds or timed sets than it could ever keep) is an error the worker
    reports as an unreadable control line (a negative one crashed the timing loop)."""
    plan = _plan(seeds=3)
    for seeds, rotations in ((-1, 0), (0, -1), (4, 0), (0, 9)):
        with pytest.raises(ValueError, match="is not one of this plan's"):
            plan.fitted(Fit(seeds, rotations))
    assert plan.fitted(Fit(3, 8)).settings.rotate_sets == 8
