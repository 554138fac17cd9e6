"""The `kforge-bot` command: a click group whose subcommands live in `kforge_bot.commands`.

Subcommands are imported only when invoked, so `kforge-bot check` never imports the GitHub, git
or LLM client libraries (the device machines lack them) and `--help` stays fast.
"""

from __future__ import annotations

import atexit
import importlib
import os
import sys

import click

from kforge_bot import __version__
from kforge_bot.config import signer
from kforge_bot.errors import KforgeError
from kforge_bot.github.actions import Actions
from kforge_bot.text import WorkflowCommandGuard

# name -> (module, attribute, one-line help shown in `kforge-bot --help`)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "check": ("kforge_bot.commands.check", "check", "Evaluate a kernel against its reference: correctness and speed."),
    "optimize": ("kforge_bot.commands.optimize", "optimize", "Run the generator/analyst loop (or the tuner) on one kernel."),
    "gate": ("kforge_bot.commands.gate", "gate", "Performance and correctness regression gate between two revisions."),
    "pr": ("kforge_bot.commands.pr", "pr", "The pull-request bot: optimize a PR's kernels, open follow-up PRs."),
    "precommit": ("kforge_bot.commands.precommit", "precommit", "Quick check of staged kernel files (the pre-commit hook)."),
    "doctor": ("kforge_bot.commands.doctor", "doctor", "Probe this machine: device, toolchain, profilers, measured ceilings."),
    "list": ("kforge_bot.commands.listing", "list_kernels", "List the kernels a repository manages (manifests, KernelBench files)."),
    "init": ("kforge_bot.commands.init", "init", "Propose a kforge.yaml for a repository's Triton and torch-extension kernels."),
    "policy": ("kforge_bot.commands.policy", "policy", "Validate and show policy files."),
    "recheck": ("kforge_bot.commands.recheck", "recheck",
                "Judge accepted kernels (optimize runs, follow-up branches) again under today's harness."),
    "bisect": ("kforge_bot.commands.bisect", "bisect", "Find the first commit where a kernel regressed past the threshold."),
    "history": ("kforge_bot.commands.history", "history", "The performance history: series, change points, dashboard."),
    "ack": ("kforge_bot.commands.history", "ack", "Acknowledge a change point (accepted, with a reason)."),
    "track": ("kforge_bot.commands.track", "track", "Measure every managed kernel at a commit; append to the history."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in SUBCOMMANDS:
            return None
        module_name, attr, _ = SUBCOMMANDS[name]
        return getattr(importlib.import_module(module_name), attr)

    def invoke(self, ctx: click.Context) -> object:
        """A subcommand returns its exit code (0 ok, 1 a verdict against the kernel, 2 usage); it ends the process
        here, once, whether the group runs standalone (click's own main, CliRunner) or under `_main`."""
        code = super().invoke(ctx)
        if isinstance(code, int) and code:
            ctx.exit(code)
        return code

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Help text comes from the table, so listing commands imports none of them.
        rows = [(name, SUBCOMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kforge-bot")
def cli() -> None:
    """kforge-bot: LLM-driven kernel optimization in git, pull requests and pre-commit."""


def main(argv: list[str] | None = None) -> None:
    guarded = Actions.read().running
    originals = sys.stdout, sys.stderr
    if guarded:  # under Actions no line the bot prints can be a workflow command but its own (kforge_bot/text.py)
        sys.stdout, sys.stderr = WorkflowCommandGuard(sys.stdout), WorkflowCommandGuard(sys.stderr)
    try:
        _main(argv)
    finally:
        if guarded:
            for stream in (sys.stdout, sys.stderr):
                if isinstance(stream, WorkflowCommandGuard):
                    stream.finish()
            sys.stdout, sys.stderr = originals


def _main(argv: list[str] | None) -> None:
    try:
        code = cli.main(args=argv, prog_name="kforge-bot", standalone_mode=False)
    except KforgeError as exc:
        click.echo(f"kforge-bot: error: {exc}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("kforge-bot: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except SystemExit:
        raise
    except OSError as exc:
        # A file or folder the machine refused (permissions, a read-only checkout, a full disk) after the early
        # checks: the user's to fix, so one line naming it, never a traceback. Other OSErrors are bugs: raised.
        if exc.filename is None:
            raise
        click.echo(f"kforge-bot: error: {exc.filename}: {exc.strerror or exc}", err=True)
        sys.exit(2)
    if isinstance(code, int) and code:
        sys.exit(code)


def _file_key() -> bytes:
    from kforge_bot.machine.signing import machine_secret

    return machine_secret()


def run() -> None:
    """The console script: `main`, then an exit that skips the interpreter's teardown. With torch (and a GPU
    context) loaded, tearing down modules costs about half a second per command, measured on the dev VM, on
    every check the gate and the loop run. Exit handlers still run; output is flushed first. Before anything, the
    cache-signing key leaves this process for a signer of its own (kforge_bot.config.signer): the bot reads files
    a pull request names, and must not hold the key that makes a cache entry trusted."""
    signer.start(_file_key)
    try:
        main()
        code: int = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`): nothing left to say
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
