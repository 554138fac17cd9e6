"""Every subcommand's --help carries usage examples, and every option an example uses exists."""

from __future__ import annotations

import shlex

import click
import pytest
from click.testing import CliRunner

from kforge_bot.cli import SUBCOMMANDS, cli


def _commands() -> list[tuple[str, click.Command]]:
    found = []
    for name in SUBCOMMANDS:
        command = cli.get_command(click.Context(cli), name)
        found.append((name, command))
        if isinstance(command, click.Group):
            found.extend((f"{name} {sub}", command.commands[sub]) for sub in command.commands)
    return found


def _options(command: click.Command) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_each_help_shows_examples_that_use_real_options(name: str) -> None:
    result = CliRunner().invoke(cli, [*name.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert "Examples:" in result.output
    examples = [line.strip() for line in result.output.split("Examples:", 1)[1].splitlines() if line.strip()]
    assert examples and all(line.startswith(f"kforge-bot {name}") for line in examples), examples
    commands = dict(_commands())
    for example in examples:
        words = shlex.split(example.split("  #", 1)[0])
        assert words[:2] == ["kforge-bot", name]
        command = commands.get(f"{name} {words[2]}", commands[name]) if len(words) > 2 else commands[name]
        for word in words:
            if word.startswith("--"):
                assert word.split("=", 1)[0] in _options(command), f"{example!r}: no option {word}"


def test_shell_completion_completes_subcommands_and_options() -> None:
    """The completion lines in docs/cli.md work: click's completion protocol through the installed entry point."""
    import os
    import subprocess
    import sys

    def complete(words: str, index: int) -> str:
        env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(index), "_KFORGE_BOT_COMPLETE": "bash_complete"}
        return subprocess.run([sys.executable, "-c", "from kforge_bot.cli import main; main()"], env=env,
                              capture_output=True, text=True, timeout=60).stdout

    assert "plain,check" in complete("kforge-bot ch", 1)
    assert "plain,--target" in complete("kforge-bot check --ta", 2)


def test_json_is_spelled_one_way_and_old_spellings_still_work(tmp_path) -> None:
    """`--json [PATH|-]` everywhere (bare: stdout); `pr --results FILE` still works, with a deprecation note."""
    import json

    runner = CliRunner()
    for args in (["list", "--json"], ["policy", "show", "--json"], ["list", "--json", "-"]):
        result = runner.invoke(cli, args)
        assert result.exit_code in (0, 1), result.output
        json.loads(result.output)
    out = tmp_path / "policy.json"
    assert runner.invoke(cli, ["policy", "show", "strict", "--json", str(out)]).exit_code == 0
    assert json.loads(out.read_text())["isolation"] == "required"
    for name in ("check", "gate", "doctor", "list", "optimize", "pr"):
        command = cli.get_command(click.Context(cli), name)
        assert "--json" in _options(command), name
    result = runner.invoke(cli, ["pr", "--results", str(tmp_path / "r.json")], env={"GITHUB_EVENT_PATH": ""})
    assert "--results is deprecated; use --json PATH" in result.output


def test_json_never_clobbers_an_existing_file_it_was_not_meant_for(tmp_path) -> None:
    kernel = tmp_path / "kernel.py"
    kernel.write_text("print('mine')\n")
    result = CliRunner().invoke(cli, ["policy", "show", "--json", str(kernel)])
    assert result.exit_code != 0 and kernel.read_text() == "print('mine')\n"


def test_target_is_one_vocabulary_on_every_command() -> None:
    """auto, a device kind or a runner class on check, optimize, doctor, gate, pr and precommit alike."""
    runner = CliRunner()
    for name in ("check", "optimize", "doctor", "precommit"):
        result = runner.invoke(cli, [name, "--target", "tpu", *(["x.py"] if name in ("check", "optimize") else [])])
        assert result.exit_code == 2, (name, result.output)
        assert "use auto, a device kind (cpu, cuda, xpu, mps) or a runner class (" in result.output, name
        assert "h200" in result.output
    from kforge_bot.targets import choose_target

    assert [choose_target(name, here=False).kind for name in ("h200", "arc-b580", "cpu", "auto")] == \
        ["cuda", "xpu", "cpu", None]


def test_the_per_evaluation_timing_budget_is_named_so_and_its_old_flag_still_works() -> None:
    """`--timing-budget` (seconds of timing in one evaluation) on check, gate and pr; `--time-budget`, its earlier
    name, is a hidden alias that still sets it (the new one wins when both are given)."""
    from kforge_bot.commands import timing_budget_option

    seen: list[float | None] = []

    @click.command()
    @timing_budget_option("Seconds.", maximum=60)
    def command(timing_budget: float | None) -> None:
        seen.append(timing_budget)

    runner = CliRunner()
    for args, expected in ((["--timing-budget", "2"], 2.0), (["--time-budget", "3"], 3.0), ([], None),
                           (["--time-budget", "3", "--timing-budget", "4"], 4.0)):
        result = runner.invoke(command, args)
        assert result.exit_code == 0, result.output
        assert seen.pop() == expected, args
    refused = runner.invoke(command, ["--time-budget", "0"])  # the alias is checked as the new flag is
    assert refused.exit_code == 2 and "0.1<=x<=60" in refused.output
    for name in ("check", "gate", "pr"):
        command_ = cli.get_command(click.Context(cli), name)
        assert {"--timing-budget", "--time-budget"} <= _options(command_), name
        shown = runner.invoke(cli, [name, "--help"]).output
        assert "--timing-budget" in shown and "--time-budget" not in shown, name
