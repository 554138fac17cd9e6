"""`kforge-bot doctor`: probe this machine and measure its ceilings (see kforge_bot/doctor/)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from kforge_bot.commands import examples, json_option, output_console, target_option, write_json
from kforge_bot.doctor.measure import quick_default
from kforge_bot.doctor.report import build_report, save_report_ceilings
from kforge_bot.errors import KforgeError
from kforge_bot.targets import choose_target


@click.command("doctor", epilog=examples(
    "kforge-bot doctor                  # device, drivers, toolchain, profilers, sandbox, measured ceilings",
    "kforge-bot doctor --json out.json  # the same, machine-readable"))
@target_option("What to probe and measure; auto picks cuda, then xpu, then mps, then cpu.")
@json_option("The full report (with '-', only the JSON is printed).")
@click.option("--save", is_flag=True, help="Save the measured ceilings as this machine's roofline.")
@click.option("--save-to", metavar="PATH", help="With --save: write the ceilings file here instead of the cache.")
@click.option("--quick", is_flag=True, default=None,
              help="Tiny sizes (seconds, for tests); figures are not ceilings. Also KFORGE_DOCTOR_QUICK=1.")
@click.option("--timeout", type=float, default=900.0, show_default=True,
              help="Seconds allowed for the measurement child.")
@click.option("--no-ncu", is_flag=True,
              help="Skip profiling a probe kernel for hardware counters (ncu on CUDA, unitrace on XPU).")
def doctor(target: str, json_path: str | None, save: bool, save_to: str | None, quick: bool | None,
           timeout: float, no_ncu: bool) -> int:
    """Probe this machine: device, drivers and toolchain, profilers, measured ceilings.

    Measurements run in a child process. Exit status 0 when the device was found and measured,
    1 when it is missing or a measurement failed, 2 on bad input."""
    target = choose_target(target, here=False).kind or "auto"  # a device this machine lacks is what doctor reports
    quick = quick_default() if quick is None else quick
    if (save or save_to) and quick:  # say so before minutes of measuring
        raise KforgeError("refusing to save quick-mode figures as ceilings",
                          hint="run `kforge-bot doctor --save` without --quick or KFORGE_DOCTOR_QUICK")
    report = build_report(target, quick=quick, timeout=timeout, ncu_probe=not no_ncu)
    saved = None
    if save or save_to:
        saved = save_report_ceilings(report, save_to)
        report["saved_ceilings"] = str(saved)
    if json_path == "-":
        click.echo(json.dumps(report, indent=2))
    else:
        write_json(report, json_path)
        _render(report)
        if json_path:
            click.echo(f"report written to {json_path}")
        if saved:
            click.echo(f"ceilings saved to {saved} (used as this machine's roofline)")
    return 0 if report["ok"] else 1


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _render(report: dict[str, Any]) -> None:
    """The report for people: a title, then one table or paragraph per part, in the report's order."""
    console = output_console()
    console.print(f"[bold]{_title(report)}[/bold]")
    console.print(_info_table(report))
    console.print(_tools_table(report["tools"]))
    sandbox = report.get("sandbox")
    if sandbox:
        colour = "green" if sandbox.get("ok") else "red"
        console.print(f"[bold]Sandbox[/bold] [{colour}]{'works' if sandbox.get('ok') else 'NOT working'}[/{colour}]: "
                      + escape(str(sandbox.get("message"))), soft_wrap=True)
    if report["profilers"]:
        console.print(_profilers_table(report["profilers"]))
    if report["comparison"]:
        console.print(_comparison_table(report["comparison"]))
        console.print("stated: the runner's datasheet figure; ref.: the project's measurement on that machine class; "
                      "%: measured as a percentage of it")
        method = report.get("method") or {}
        console.print(f"timing: {method.get('timer')}; copy {method.get('copy_bytes', 0) >> 20} MiB, "
                      f"matmul n={method.get('matmul_n')}, median of {method.get('reps')} "
                      f"after {method.get('warmup')} warm-up")
    if report["missing"]:
        console.print("[bold]Missing or not working[/bold]")
        for line in report["missing"]:
            console.print(f"  - {line}", soft_wrap=True)
    else:
        console.print("[green]Nothing missing.[/green]")


def _title(report: dict[str, Any]) -> str:
    dev = report.get("device")
    title = f"kforge-bot doctor: {report.get('target') or report['requested_target']}"
    if dev:
        title += f" - {dev['name']}"
    if report.get("runner"):
        title += f" (runner {report['runner']['name']})"
    return title


def _info_table(report: dict[str, Any]) -> Table:
    info = Table(title="Device and software", show_header=False, title_justify="left")
    info.add_column("what")
    info.add_column("value")
    for k, v in (report.get("device") or {}).items():
        info.add_row(k, _fmt(v))
    for k, v in report.get("software", {}).items():
        if not k.endswith("_error"):
            info.add_row(k, _fmt(v))
    return info


def _tools_table(tools_found: list[dict[str, Any]]) -> Table:
    """The tools that matter on this target, or that are installed anyway."""
    tools = Table(title="Tools", title_justify="left")
    for col in ("tool", "status", "version / message"):
        tools.add_column(col)
    for t in tools_found:
        if not (t["relevant"] or t["found"]):
            continue
        status = "[green]ok[/green]" if t["ok"] else ("[red]broken[/red]" if t["found"] else "[yellow]missing[/yellow]")
        tools.add_row(t["name"], status, t["version"] if t["ok"] else t["message"])
    return tools


def _profilers_table(profilers: list[dict[str, Any]]) -> Table:
    prof = Table(title="Profilers (tried)", title_justify="left")
    for col in ("profiler", "works", "detail"):
        prof.add_column(col)
    for p in profilers:
        prof.add_row(p["name"], "[green]yes[/green]" if p.get("ok") else "[red]no[/red]", _fmt(p.get("message")))
    return prof


def _comparison_table(comparison: list[dict[str, Any]]) -> Table:
    cmp = Table(title="Measured ceilings vs runner facts", title_justify="left")
    for col in ("figure", "unit", "measured", "stated", "%", "ref.", "%", "status"):
        cmp.add_column(col, justify="left" if col in ("figure", "unit", "status") else "right", no_wrap=True)
    for r in comparison:
        colour = {"ok": "green", "low": "yellow", "failed": "red"}.get(r["status"], "white")
        cmp.add_row(r["figure"].replace(" bandwidth", ""), r["unit"], _fmt(r["measured"]), _fmt(r["datasheet"]),
                    _fmt(r["pct_of_datasheet"]), _fmt(r["reference"]), _fmt(r["pct_of_reference"]),
                    f"[{colour}]{r['status']}[/{colour}]")
    return cmp
