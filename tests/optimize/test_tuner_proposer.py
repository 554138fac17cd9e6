"""The built-in tuner as the loop's proposer (kforge_bot.optimize.tuner_proposer): what it reports, what it
proposes in a step and in a round, and what it learns from results."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from test_protocols import answer_of, asking, view_of
from test_trajectory import result, start_event

from kforge_bot.errors import SearchExhausted
from kforge_bot.optimize.trajectory import Trajectory
from kforge_bot.optimize.tuner_proposer import TunerProposer
from kforge_bot.kernelspec import load_spec

FIXTURE = Path(__file__).parents[1] / "data" / "optimize"
REPO = Path(__file__).resolve().parents[2]


def started(tmp_path: Path) -> tuple[TunerProposer, Trajectory]:
    t = Trajectory.create(tmp_path)
    start_event(t)
    t.append("baseline", result=result(speedup=1.0), eval_s=1.0)
    return TunerProposer(load_spec(FIXTURE / "kforge.yaml"), cpu_count=2), t


def test_start_reports_the_tunables_once_and_a_step_changes_the_marked_parameter_first(tmp_path: Path) -> None:
    proposer, t = started(tmp_path)
    events, _ = answer_of(proposer.observe(view_of(t), ()))
    assert [e.kind for e in events] == ["tunables"]
    assert events[0].fields["tunables"][1].startswith("TILE_N = 32")
    t.append("tunables", **events[0].fields)  # as the loop writes it
    again, _ = answer_of(TunerProposer(proposer.spec, cpu_count=2).observe(view_of(t), ()))
    assert again == []  # a resumed run has them already

    events, proposal = answer_of(proposer.propose(view_of(t, iteration=1)))
    assert events == [] and proposal.change == "TILE_N 32->64"
    assert proposal.assignment == {"TILE_M": 8, "TILE_N": 64, "THREADS": 1}
    assert "TILE_N = 64  # kforge: tune" in proposal.source and proposal.source != proposer.original
    assert proposer.describe()["generator"] == "built-in tuner"


def test_a_round_proposes_distinct_untried_neighbours(tmp_path: Path) -> None:
    proposer, t = started(tmp_path)
    view = view_of(t, parallel=3)
    answer_of(proposer.observe(view, ()))
    taken: list[dict[str, int]] = []
    for slot in range(3):
        _, proposal = answer_of(proposer.propose(asking(view, slot + 1, slot, tuple(taken))))
        assert proposal is not None and proposal.assignment not in taken
        taken.append(proposal.assignment)
    assert all(sum(a[k] != v for k, v in {"TILE_M": 8, "TILE_N": 32, "THREADS": 1}.items()) == 1 for a in taken)


def test_results_feed_the_search_and_a_kernel_without_tunables_ends_the_tuner(tmp_path: Path) -> None:
    proposer, t = started(tmp_path / "a")
    view = view_of(t)
    answer_of(proposer.observe(view, ()))
    _, first = answer_of(proposer.propose(asking(view, 1)))
    t.append("candidate", iteration=1, file=t.write_source("0001.py", first.source), sha256="a",
             assignment=first.assignment)
    t.append("result", iteration=1, result=result("incorrect"), accepted=False)
    answer_of(proposer.observe(view, [t.record.iterations[1]]))
    assert proposer.search is not None and proposer.search.results[tuple(sorted(first.assignment.items()))] is None
    _, second = answer_of(proposer.propose(asking(view, 2)))
    assert second.assignment != first.assignment  # the failed direction is not proposed again

    softmax = load_spec(REPO / "examples" / "kernelbench" / "softmax_problem.py")
    empty = Trajectory.create(tmp_path / "b")
    with pytest.raises(SearchExhausted, match="kforge: tune NAME in"):
        answer_of(TunerProposer(softmax, cpu_count=2).observe(view_of(empty), ()))


def test_a_wide_round_fills_its_slots_with_joint_moves_once_single_moves_run_out(tmp_path: Path) -> None:
    proposer, t = started(tmp_path)
    view = view_of(t, parallel=16)
    answer_of(proposer.observe(view, ()))
    current = {"TILE_M": 8, "TILE_N": 32, "THREADS": 1}
    taken: list[dict[str, int]] = []
    for slot in range(16):
        _, proposal = answer_of(proposer.propose(asking(view, slot + 1, slot, tuple(taken))))
        if proposal is None:
            break
        taken.append(proposal.assignment)
    moved = [sum(a[k] != v for k, v in current.items()) for a in taken]
    assert len(taken) == len({tuple(sorted(a.items())) for a in taken})
    assert 1 in moved and max(moved) >= 2 and moved == sorted(moved)  # single moves first, then joint ones


def test_a_pin_after_an_imported_helpers_call_is_proposed_and_named_from_as_written(tmp_path: Path) -> None:
    kernel = (
        "import triton\n"
        "from mylib.utils import calculate_settings\n"
        "@triton.jit\n"
        "def k(x, BLOCK_SIZE: tl.constexpr):\n"
        "    pass\n"
        "def launch(x, n):\n"
        "    BLOCK_SIZE, num_warps = calculate_settings(n)\n"
        "    k[(1,)](x, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)\n"
    )
    spec = SimpleNamespace(baseline=SimpleNamespace(source=kernel), language="triton", kernel_path=Path("k.py"),
                           kernel_file="k.py")
    t = Trajectory.create(tmp_path)
    start_event(t)
    t.append("baseline", result=result(speedup=1.0), eval_s=1.0)
    proposer = TunerProposer(spec, cpu_count=2)  # type: ignore[arg-type]
    events, _ = answer_of(proposer.observe(view_of(t), ()))
    assert events[0].fields["tunables"] == ["num_warps = as written (line 7, call; tries [1, 2, 4, as written, 8, 16, 32])"]
    _, proposal = answer_of(proposer.propose(view_of(t, iteration=1)))
    value = proposal.assignment["num_warps"]
    assert proposal.change == f"num_warps as written->{value}"
    assert f"calculate_settings(n); num_warps = {value}\n" in proposal.source
