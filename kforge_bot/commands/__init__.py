"""The subcommands of `kforge-bot`, one module each (kforge_bot.cli loads them lazily)."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from kforge_bot.errors import KforgeError
from kforge_bot.machine.writable import write_refusal
from kforge_bot.targets import choose_target


def examples(*lines: str) -> str:
    """A click epilog with usage examples, kept as written (click rewraps paragraphs not marked with \\b)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def output_console(stderr: bool = False):  # -> rich.console.Console
    """The console a command prints its result on. Into a log or a pipe, lines stay whole (a wrapped command
    could not be pasted back, a wrapped figure not grepped); on a terminal, rich wraps to its width."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, soft_wrap=not stream.isatty())


def json_option(help_text: str):  # -> a click decorator
    """`--json PATH` on every command that reports: the report as JSON at PATH, or on stdout for `-` or a bare
    `--json` (the same spelling everywhere). A PATH that would be refused is refused as the options are read,
    before any evaluation: an hour of measurements must not end in "cannot write here"."""
    def refuse_early(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        refusal = json_refusal(value)
        if refusal is not None:
            raise refusal
        return value

    return click.option("--json", "json_path", is_flag=False, flag_value="-", default=None, metavar="[PATH|-]",
                        callback=refuse_early,
                        help=f"{help_text} Write it as JSON to PATH, or to stdout ('-', or --json alone).")


def json_refusal(json_path: str | Path | None) -> KforgeError | None:
    """Why the JSON report could not be written at `json_path` (None: it can, or it goes to stdout)."""
    if json_path is None or str(json_path) == "-":
        return None
    path = Path(json_path)
    # `--json` takes the next word as its path: `list --json .` or `check --json kernel.py` must not clobber it.
    if path.is_dir() or (path.exists() and path.suffix.lower() != ".json"):
        return KforgeError("refusing to write the JSON report over this existing file or folder", path=path,
                           hint="give a new path or a .json file, or put --json last (or --json -) for stdout")
    return write_refusal(path, "the JSON report", "give a path in a folder you can write (or --json - for stdout)")


def write_json(data: object, json_path: str | None) -> None:
    """Write a command's JSON report where `--json` said; nothing when it was not given."""
    if json_path is None:
        return
    text = json.dumps(data, indent=2, default=str)
    if str(json_path) == "-":
        click.echo(text)
        return
    path = Path(json_path)
    refusal = json_refusal(path)  # checked when the option was read; the folder may have changed since
    if refusal is not None:
        raise refusal
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")


def renamed_option(name: str, old_name: str, dest: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
    """An option under its new `name`, with its earlier spelling `old_name` kept working as a hidden alias (scripts
    and workflows written against it); given both, the new one wins."""
    legacy = f"{dest}_from_{old_name.lstrip('-').replace('-', '_')}"

    def decorate(command: Callable[..., Any]) -> Any:
        @functools.wraps(command)
        def merged(*args: Any, **params: Any) -> Any:
            old_value = params.pop(legacy, None)
            if params.get(dest) is None:
                params[dest] = old_value
            return command(*args, **params)

        hidden = click.option(old_name, legacy, type=kwargs.get("type"), default=None, hidden=True)(merged)
        return click.option(name, dest, **kwargs)(hidden)

    return decorate


def timing_budget_option(help_text: str, maximum: float) -> Callable[[Callable[..., Any]], Any]:
    """`--timing-budget S`: seconds of interleaved timing in ONE evaluation (EvalSettings.timing_budget_s), never a
    whole run's (that is `budgets:` and optimize's --time-limit). `--time-budget`, its earlier name, still works."""
    return renamed_option("--timing-budget", "--time-budget", "timing_budget", type=click.FloatRange(0.1, maximum),
                          default=None, help=help_text)


def target_option(help_text: str, **kwargs: object):  # -> a click decorator
    """`--target` the same way on every command: auto, a device kind, or a runner class (h200, b200, arc-b580,
    ...), which means that class's device kind here. Anything else is refused as the options are read, naming both
    lists (kforge_bot.targets.choose_target, which the command calls again to check the device is here)."""
    class TargetName(click.ParamType):
        name = "target"

        def convert(self, value: object, param: object, ctx: object) -> str:
            text = str(value).strip()
            try:
                choose_target(text, here=False)
            except KforgeError as exc:
                self.fail(f"{text!r}: {exc.hint or exc}", param, ctx)  # type: ignore[arg-type]
            return text

    options = {"default": "auto", "show_default": True, **kwargs}
    return click.option("--target", type=TargetName(), metavar="auto|KIND|RUNNER",
                        help=f"{help_text} auto, a device kind (cpu, cuda, xpu, mps) or a runner class "
                             "(h200, b200, arc-b580, ...: its device kind here).", **options)
