"""`kforge-bot check`'s report on the console: one evaluation's verdict, times and notes, and the line for a run
that checked nothing."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from kforge_bot.evaluate.wire.result import EvalResult, case_breakdown, directions_text
from kforge_bot.evaluate.wire.shapes import DEFINITION, geomean_times, text_lines


def heldout_lines(variants: list[dict[str, Any]]) -> list[str]:
    """'held-out: 2 variants checked' and one line per variant the reference could not run (never counted against
    the candidate)."""
    if not variants:
        return []
    checked = [v for v in variants if not v.get("skipped")]
    lines = [f"held-out: {len(checked)} of {len(variants)} variant(s) checked (sizes and values not listed; never "
             "timed)"]
    lines += [f"  skipped {v['label']}: the reference cannot run it ({v['skipped']})" for v in variants
              if v.get("skipped")]
    return lines


def _fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f} us" if value < 1 else f"{value:.3f} ms"


LAUNCH_SHARE = 1.05  # an eager call this much longer than the device's own time is paying for its launches


def launch_bound_notes(timing: list[dict[str, Any]]) -> list[str]:
    """Where the timed figure leaves out launch overhead a user calling the kernel eagerly would pay (timed from
    graph replays, or eagerly behind a device lead), both figures: the device's, which decides the verdict, and
    the eager calls' of the warm-up (no interval: a handful of calls each)."""
    notes = []
    for row in timing:
        per_call = row.get("per_call_ms") or {}
        b, c = per_call.get("baseline"), per_call.get("candidate")
        if not b or not c or not all(side.get("device") for side in (b, c)):
            continue
        if max(b["eager"] / b["device"], c["eager"] / c["device"]) < LAUNCH_SHARE:
            continue
        how = "replayed from CUDA graphs" if row.get("mode") == "cuda_graph" else "queued behind a device lead"
        notes.append(f"  shape set {row['shape_set']}: timed as device work ({how}): a call takes "
                     f"{_fmt_ms(b['device'])} (baseline) and {_fmt_ms(c['device'])} (candidate) on the device; called "
                     f"eagerly, launches included, {_fmt_ms(b['eager'])} and {_fmt_ms(c['eager'])} "
                     f"({b['eager'] / c['eager']:.3f}x; warm-up medians, no interval)")
    return notes


def render(result: EvalResult, title: str, console: Console) -> None:
    """One evaluation's report on `console`: the verdict and times, the reason, then each note."""
    color = "green" if result.correct else "yellow" if result.verdict == "inconclusive" else "red"
    console.print(f"[bold]{title}[/bold]")
    several = len(result.per_shape) > 1
    # With several shape sets the medians shown are geometric means over them: their ratio is what the headline
    # speedup says (a sum would be ruled by the largest set).
    mean = " (median, geomean)" if several else " (median)"
    table = Table(show_header=True, header_style="bold")
    for col in ("target", "verdict", f"baseline{mean}", f"candidate{mean}", "speedup (95% CI)"):
        table.add_column(col)
    speed = "-"
    if result.speedup is not None and result.speedup_ci:
        speed = f"{result.speedup:.3f}x ({result.speedup_ci[0]:.3f}-{result.speedup_ci[1]:.3f})"
    elif result.speedup is not None:
        speed = f"{result.speedup:.3f}x (no interval)"
    base_ms, cand_ms = geomean_times(result.per_shape) if several else (
        result.baseline.median_ms if result.baseline else None,
        result.candidate.median_ms if result.candidate else None)
    table.add_row(f"{result.target} ({result.device_name})", f"[{color}]{result.verdict}[/{color}]",
                  _fmt_ms(base_ms), _fmt_ms(cand_ms), speed)
    console.print(table)
    if result.speedup is not None:
        # Not the ratio of the two medians: each pair is timed back to back, so drift cancels within a pair.
        console.print(DEFINITION if several else
                      "speedup: the median of per-pair ratios (baseline / candidate, each pair timed back to back)",
                      soft_wrap=True)
        for line in text_lines(result.per_shape) if several else ():
            console.print(f"  {line}", markup=False, soft_wrap=True)
    console.print(f"reason: {result.reason}", markup=False, soft_wrap=True)
    corr = result.correctness
    if corr.get("cases_checked"):
        console.print(f"correctness: {corr['cases_checked']} outputs compared ({case_breakdown(corr)}), "
                      f"max abs error {corr['max_abs_error']:.3g}, max relative error {corr['max_rel_norm_error']:.3g}")
    for line in heldout_lines(corr.get("heldout") or []):
        console.print(line, markup=False, soft_wrap=True)
    fit = result.details.get("memory_fit")
    if fit:
        console.print(f"memory: {fit['note']}")
    if result.details.get("directions"):
        console.print("directions (the speedup above is forward+backward): "
                      + directions_text(result.details["directions"]))
    for line in launch_bound_notes(result.details.get("timing", [])):
        console.print(line)
    shown = result.details.get("conditions")
    if shown:  # each side's busy threads, and what disturbed the timing (docs/inconclusive.md)
        console.print(f"conditions: {shown['threads']}" + (f"; disturbed: {shown['disturbed']}"
                                                           if shown.get("disturbed") else ""), markup=False,
                      soft_wrap=True)
    _render_baselines(console, result.details.get("baselines"))
    if result.speedup_ci and result.correct:
        lo, hi = result.speedup_ci
        verdict = "faster" if lo > 1 else "slower" if hi < 1 else "no difference resolved"
        slow = result.regressions
        if slow:
            verdict += f", but a regression on {', '.join(p.label for p in slow)}"
        console.print(f"speed: {verdict} ({result.details['timing'][0]['stop_reason']})", markup=False)
    elif result.speedup is not None and result.correct:
        console.print(f"speed: not resolved: {result.details.get('speedup_ci_note', 'no confidence interval')}")


def _render_baselines(console: Any, baselines: dict[str, Any] | None) -> None:
    """Which baseline each figure is against: eager, each compiled baseline (or why it was dropped), the faster."""
    if not baselines:
        return
    if "best" not in baselines:
        console.print(f"baselines: {baselines.get('note', '')}")
        return

    def figure(entry: dict[str, Any]) -> str:
        ci = entry.get("speedup_ci")
        return f"{entry['speedup']:.3f}x" + (f" ({ci[0]:.3f}-{ci[1]:.3f})" if ci else " (no interval)")

    console.print(f"against eager (the kernel as written): {figure(baselines['eager'])}")
    for kind in (k for k in baselines if k not in ("eager", "best", "note")):
        entry = baselines[kind]
        if entry.get("used"):
            over = ", ".join(f"{p['speedup_over_eager']:.3f}x" for p in entry["per_shape"])
            console.print(f"against torch.compile ({entry['mode']}): {figure(entry['against'])}; torch.compile "
                          f"itself is {over} eager's speed")
        else:
            console.print(f"torch.compile ({entry['mode']}) baseline {entry['reason']}")
    console.print(f"against the faster of {' and '.join(baselines['best']['baselines'])} (the KForge paper's metric): "
                  f"{figure(baselines['best'])}")


def nothing_checked(rows: list[dict[str, Any]], target: str) -> str:
    """The one line for a run in which every kernel was skipped: nothing checked, and why."""
    reasons = sorted({str(r.get("reason", "")) for r in rows})
    why = reasons[0] if len(reasons) == 1 else f"{reasons[0]} (and {len(reasons) - 1} other reason(s))"
    return (f"error: nothing was checked: all {len(rows)} kernel(s) were skipped on target {target} ({why}); "
            "run on a machine with their device, or pass --target")
