"""The reference store: reference outputs computed once per key by a trusted worker, kept in the bot's memory."""

from __future__ import annotations

from kforge_bot.evaluate.references import _reference_death
from kforge_bot.evaluate.sandbox import ChildOutcome


def test_a_reference_killed_after_writing_gigabytes_is_named_as_host_memory_not_the_reference() -> None:
    written = [{"phase": "reference", "case": f"c{i}", "output_bytes": 6_400_000_000} for i in range(7)]
    why, hint = _reference_death(ChildOutcome(returncode=-9, wall_s=80), written, cases=11)
    assert "killed (SIGKILL) after 7 of 11 cases had written 44.8 GB of outputs (6.4 GB a case)" in why
    assert "most likely out of host memory, not a fault of the reference" in why
    assert "--seeds 1" in hint and "141 GB" in hint  # 11 cases x 6.4 GB, in the worker and in this process
    # A small reference that dies is the reference's own failure, with its last words.
    why, hint = _reference_death(ChildOutcome(returncode=1, log_tail="Traceback\nValueError: bad shape\n"),
                                 written[:1], cases=11)
    assert why == "exited with status 1 before reporting a result; its last words: ValueError: bad shape"
    assert hint.startswith("the reference and its inputs must run")
