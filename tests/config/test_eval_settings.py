"""EvalSettings: the one count of seeds an evaluation draws."""

from __future__ import annotations

from kforge_bot.config.eval_settings import EvalSettings


def test_the_seed_count_is_the_settings_else_the_spec_s_and_never_none() -> None:
    assert EvalSettings().seed_count(5) == 5
    assert EvalSettings(seeds=2).seed_count(5) == 2
    assert EvalSettings(seeds=0).seed_count(0) == 1
