"""The end of a run, for people: report.md and plot.png in the report folder.

Both are functions of the run's record (kforge_bot.optimize.record), so a report can be rebuilt from a
trajectory file alone. Every figure comes from a measurement in the record; what was not measured is
said to be unknown, never filled in. matplotlib is imported only to draw the plot; without it the report
says the plot was skipped and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kforge_bot.evaluate.wire.result import case_breakdown, directions_text
from kforge_bot.evaluate.wire.shapes import DEFINITION, geomean_times, markdown_table, regression_text
from kforge_bot.optimize.counters import section, tool_title
from kforge_bot.optimize.record import IterationRecord, RunRecord
from kforge_bot.text import one_line

REPORT_FILE = "report.md"
PLOT_FILE = "plot.png"


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    plot: Path | None  # None when the plot was skipped
    plot_note: str  # why it was skipped, or what it shows


def write_report(report_dir: str | Path, record: RunRecord) -> ReportFiles:
    report_dir = Path(report_dir)
    plot_path = report_dir / PLOT_FILE
    skipped = render_plot(record, plot_path)
    plot = None if skipped else plot_path
    missing = roofline_missing(record)
    note = skipped or ("speedup per iteration; the best's speedup per shape set; " +
                       ("the roofline (the device's ceilings) with the kernel as written and the best on it"
                        if missing is None else f"no roofline panel ({missing})"))
    markdown = report_dir / REPORT_FILE
    markdown.write_text(render_markdown(record, plot_file=PLOT_FILE if plot else None, plot_note=note),
                        encoding="utf-8")
    return ReportFiles(markdown, plot, note)


# ---------------------------------------------------------------------------------------- Markdown


def render_markdown(record: RunRecord, *, plot_file: str | None = None, plot_note: str = "") -> str:
    start = record.start
    parts = [f"# kforge-bot optimize: `{start.get('kernel', '?')}`", _overview(record), _result(record),
             _shapes(record), _baselines(record), _comparison(record), _counters(record), _iterations(record),
             _advice(record), _plot(plot_file, plot_note),
             _overhead(record), _files(record)]
    return "\n\n".join(p for p in parts if p) + "\n"


def _overview(record: RunRecord) -> str:
    start = record.start
    baseline = record.baseline or {}
    device = baseline.get("device_name") or "device not measured"
    latest = next((e.get("budgets") for e in reversed(record.sessions) if e.get("budgets")), None)
    budgets = latest or start.get("budgets") or {}  # a resumed session may have raised them
    if start.get("mode") == "llm":
        model = ", ".join(record.models) or start.get("model") or "model not reported"
        where = start.get("endpoint_url") or "an endpoint the run did not record"
        generator = f"LLM generator and analyst: {model} at {where}"
    else:
        generator = "built-in tuner (no LLM endpoint was configured; it searches the kernel's own parameters)"
    rows = [
        ("kernel", f"`{start.get('kernel_file', '?')}` (entry `{start.get('entry', '?')}`, {start.get('language', '?')})"),
        ("target", f"{start.get('target', '?')} ({device})"),
        ("generator", generator),
        ("iterations", f"{record.iterations_used} of {budgets.get('iterations', '?')}"),
    ]
    if start.get("mode") == "llm":
        usage = record.usage or {}
        cap = f" of {budgets['tokens']:,}" if budgets.get("tokens") else ""
        est = " (estimated: the endpoint sent no usage)" if usage.get("estimated") else ""
        tokens = (f"{usage.get('total_tokens', 0):,}{cap} (prompt {usage.get('prompt_tokens', 0):,}, completion "
                  f"{usage.get('completion_tokens', 0):,}; {usage.get('retries', 0)} retried requests){est}")
        rows.append(("tokens", tokens))
    sessions = len(record.sessions) or 1
    rows.append(("wall time", f"{_duration(record.wall_s)} over {sessions} session{'s' if sessions != 1 else ''}"))
    stop = record.stop
    rows.append(("stopped because", _cell(stop["reason"]) if stop else "the run did not record a stop (killed?)"))
    settings = start.get("settings") or {}
    if settings:
        timing = settings.get("timing_budget_s", settings.get("time_budget_s"))  # the latter: runs recorded before
        evaluation = (f"{settings.get('seeds') or 'spec'} seeds per shape set, up to {timing} s "
                      f"of interleaved timing per candidate, {int(settings.get('confidence', 0.95) * 100)}% intervals")
        rows.append(("evaluation", evaluation))
    return "| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def _result(record: RunRecord) -> str:
    best = record.best
    ends = record.ends
    written = next((e.get("written_to") for e in reversed(ends) if e.get("written_to")), None)
    if best is None or best.speedup is None:
        text = ("## Result\n**No candidate beat the kernel as written** (accepted only when correct and faster with "
                "the whole 95% interval above 1x, and a regression on no shape set): the original file was left "
                "untouched.")
        correct = [it for it in record.completed if it.verdict == "pass"]
        if correct:
            top = max(correct, key=lambda it: it.speedup or 0.0)
            text += (f" The fastest correct candidate measured {_speed(top)} (iteration {top.iteration}), "
                     "which does not establish a speedup.")
        return text
    result = best.result or {}
    corr = result.get("correctness") or {}
    cases = corr.get("cases_checked")
    # The count and what it is made of, as `check` says it: each kind of compared output, adding up to the count.
    checked = (f", correct on {cases} compared outputs ({case_breakdown(corr)}; "
               f"max abs error {_num(corr.get('max_abs_error'))})") if cases else ""
    change = f" ({best.change})" if best.change else ""
    where = f" Written to `{written}`." if written else " Not written anywhere (no --out or --write)."
    directions = (result.get("details") or {}).get("directions")
    # A kernel with a backward: the headline is forward+backward; each direction said beside it.
    by_direction = f" By direction: {directions_text(directions)}." if directions else ""
    return (f"## Result\n**{best.speedup:.2f}x faster** than the kernel as written (95% interval "
            f"{best.speedup_ci[0]:.3f}-{best.speedup_ci[1]:.3f}){checked}. Best: iteration {best.iteration}{change}, "
            f"saved as `{_best_name(record)}`.{where}{by_direction}" if best.speedup_ci else
            f"## Result\n**{best.speedup:.2f}x faster** than the kernel as written.{where}{by_direction}")


def _shown(record: RunRecord) -> IterationRecord | None:
    """Whose shape sets the report shows: the best's, or with no best the fastest correct candidate's (a candidate
    fast overall but slow on one set is the one a reader asks about)."""
    if record.best is not None:
        return record.best
    correct = [it for it in record.completed if it.verdict == "pass" and it.per_shape]
    return max(correct, key=lambda it: it.speedup or 0.0) if correct else None


def _shapes(record: RunRecord) -> str:
    """The per-shape table beside the headline: the best's sets (or, with no best, the fastest correct candidate's),
    each judged by the rule that decided acceptance."""
    shown = _shown(record)
    if shown is None or not shown.per_shape:
        return ""
    which = "the best" if shown is record.best else f"iteration {shown.iteration} (the fastest correct, not accepted)"
    text = (f"## Per shape set\nEach shape set of {which} against the kernel as written. {DEFINITION[:1].upper()}"
            f"{DEFINITION[1:]}; a candidate with such a set is never accepted.\n\n"
            + markdown_table(shown.per_shape, before="kernel as written", after="candidate"))
    slow = regression_text(shown.per_shape)
    return text + (f"\n\nNot accepted: {slow}." if slow and shown is not record.best else "")


def _baselines(record: RunRecord) -> str:
    """Which baseline each figure is against, where the policy asked for torch.compile besides eager."""
    if not record.compiled_baselines:
        return ""
    lines = ["## Baselines", "Figures above are against eager (the kernel as written, timed in the same run)."]
    for kind, entry in record.compiled_baselines.items():
        if entry.get("used"):
            over = ", ".join(f"shape set {p['shape_set']}: {p['speedup_over_eager']:.3f}x"
                             for p in entry.get("per_shape") or [])
            lines.append(f"- torch.compile ({entry.get('mode')}), the `{kind}` baseline: correct; its speed over "
                         f"eager: {over}")
        else:
            lines.append(f"- torch.compile ({entry.get('mode')}), the `{kind}` baseline: "
                         f"{one_line(entry.get('reason', ''), 300)}")
    best = record.best
    found = ((best.result or {}).get("details") or {}).get("baselines") if best else None
    if found and found.get("best"):
        for kind in (k for k in found if k not in ("eager", "best", "note") and (found[k] or {}).get("against")):
            lines.append(f"- best candidate against `{kind}`: {_figure(found[kind]['against'])}")
        lines.append(f"- best candidate against the faster of {' and '.join(found['best']['baselines'])} (the KForge "
                     f"paper's metric): {_figure(found['best'])}")
        accepted = ((best.result or {}).get("details") or {}).get("accepted_against")
        if accepted:
            lines.append(f"- accepted against: {accepted}")
    elif best is None:
        lines.append("- no candidate was accepted: acceptance needed the whole interval above 1x against the faster "
                     "of eager and every compiled baseline that passed")
    return "\n".join(lines)


def _figure(entry: dict[str, Any]) -> str:
    ci = entry.get("speedup_ci")
    return f"{entry['speedup']:.3f}x" + (f" ({ci[0]:.3f}-{ci[1]:.3f})" if ci else " (no interval)")


def _comparison(record: RunRecord) -> str:
    base_result = record.baseline
    if not base_result:
        return ""
    best = record.best
    base_pos = record.position("baseline")
    best_pos = record.position("best")
    base_ms, best_ms = record.times_ms()
    shapes = best.per_shape if best else []
    if len(shapes) > 1:
        # One time for the kernel as written: the figures whose ratio the headline speedup is (each set's own is in
        # the per-shape table; a sum would be ruled by the largest set).
        mean_base, mean_best = geomean_times(shapes)
        rows = [("median time per call (geometric mean over shape sets)", _ms(mean_base), _ms(mean_best))]
    else:
        rows = [("median time per call", _ms(base_ms), _ms(best_ms) if best else "-")]

    def fig(pos: dict[str, Any] | None, key: str, fmt: str) -> str:
        if not pos or pos.get(key) is None:
            return "n/a"
        return fmt.format(pos[key])

    rows.append(("achieved bandwidth", fig(base_pos, "achieved_gbs", "{:.4g} GB/s"),
                 fig(best_pos, "achieved_gbs", "{:.4g} GB/s") if best else "-"))
    if (base_pos or {}).get("flops_known"):
        rows.append(("achieved compute", fig(base_pos, "achieved_tflops", "{:.4g} TFLOP/s"),
                     fig(best_pos, "achieved_tflops", "{:.4g} TFLOP/s") if best else "-"))
    label = "fraction of the roofline" if (base_pos or {}).get("flops_known") else "fraction of peak bandwidth"
    rows.append((label, fig(base_pos, "roofline_fraction", "{:.1%}"),
                 fig(best_pos, "roofline_fraction", "{:.1%}") if best else "-"))
    table = "| | kernel as written | best |\n|---|---|---|\n" + "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    notes = ["Both columns come from the best candidate's evaluation, where the two were timed interleaved. Each "
             "time is that side's median; the speedup is the median of the per-pair ratios, so on a busy machine "
             "the two can disagree (the ratio is the robust figure)."
             if best else "Times from the first evaluation of the kernel as written."]
    workload = record.workload or {}
    if workload.get("basis"):
        notes.append(f"Bytes counted: {workload['basis']}.")
    if workload.get("error"):
        notes.append(f"Input sizes unknown ({workload['error']}).")
    ceilings = record.ceilings
    if ceilings:
        bw = f"{ceilings['bandwidth_gbs']:g} GB/s" if ceilings.get("bandwidth_gbs") else "no bandwidth figure"
        notes.append(f"Ceilings ({ceilings.get('origin')}): {bw}; source: {ceilings.get('source')}.")
    else:
        note = record.ceilings_note or "no ceilings are known for this device"
        notes.append(f"{note[:1].upper()}{note[1:]}; so no fraction of a roofline is given.")
    return "## Kernel as written vs best\n" + table + "\n\n" + " ".join(notes)


def _iterations(record: RunRecord) -> str:
    done = record.completed
    if not done:
        return "## Iterations\nNo iteration completed."
    rounds = any(it.round is not None for it in done)  # --parallel: several candidates per round
    lines = ["## Iterations", "| # | " + ("Round | " if rounds else "") + "change | verdict | speedup (95% CI) | "
             "accepted | evaluate s | note |", "|---|" + ("---|" if rounds else "") + "---|---|---|---|---|---|"]
    for it in done:
        note = _cell(one_line(it.reason, 140)) if it.verdict != "pass" else ""
        slow = regression_text(it.per_shape) if it.verdict == "pass" else ""
        if slow:
            note = _cell(one_line(f"not accepted: {slow}", 200))
        if it.duplicate_of:
            note = f"same source as iteration {it.duplicate_of}; its result reused"
        if it.cached:
            note = ("result cache hit (measured earlier on the same hardware); " + note).rstrip("; ")
        if it.model and rounds:
            note = f"{note} (model {_cell(it.model)})".strip()
        round_cell = f"{it.round if it.round is not None else '-'} | " if rounds else ""
        lines.append(f"| {it.iteration} | {round_cell}{_cell(it.change or '-')} | {it.verdict} | {_speed(it)} | "
                     f"{'yes' if it.accepted else ''} | {it.eval_s:.1f} | {note} |")
    if record.tunables:
        lines.append("\nTunable parameters found: " + "; ".join(f"`{t}`" for t in record.tunables))
    return "\n".join(lines)


def _advice(record: RunRecord) -> str:
    if not record.recommendation_log:
        return ""
    parts = ["## Analyst's recommendations"]
    for entry in record.recommendation_log:
        n = entry["for_iteration"]
        parts.append(f"For {'the kernel as written' if n == 0 else f'iteration {n}'}:")
        parts.append("\n".join(f"{i}. {one_line(item, 400)}" for i, item in enumerate(entry["items"], 1)))
    return "\n\n".join(parts)


def _plot(plot_file: str | None, note: str) -> str:
    if plot_file:
        return f"## Plot\n![{note}]({plot_file})"
    return f"## Plot\nPlot skipped: {note}."


def _overhead(record: RunRecord) -> str:
    done = [it for it in record.completed if it.iteration_s > 0]
    if not done:
        return ""
    n = len(done)
    wall = sum(it.iteration_s for it in done) / n
    ev = sum(it.eval_s for it in done) / n
    llm = sum(it.llm_s for it in done) / n
    own = sum(it.overhead_s for it in done) / n
    text = (f"## Loop overhead\nPer iteration (mean of {n}): {wall:.2f} s wall, of which evaluating "
            f"{ev:.2f} s, waiting for the model {llm:.2f} s, and the loop itself {own:.3f} s. The kernel as written "
            f"took {record.baseline_eval_s:.1f} s to evaluate once at the start.")
    if any(it.loop_s is not None for it in done) and ev > 0:
        text += (f" Candidates of a round overlap (evaluated at once), so the loop's own time was measured per "
                 f"candidate: {own / ev:.2%} of evaluation time.")
    return text


def _counters(record: RunRecord) -> str:
    best = record.best
    before, after = record.counters.get(0), record.counters.get(best.iteration) if best else None
    if not (before or after or record.counters_note):
        return ""
    return f"## Hardware counters ({tool_title(before, after)})\n" + section(before, after, record.counters_note)


def _files(record: RunRecord) -> str:
    lines = ["## Files", "- `trajectory.jsonl`: every prompt, reply, candidate and result, in order",
             "- `candidates/`: every candidate's source, and the kernel as written (`baseline` file)"]
    if record.best is not None:
        lines.append(f"- `{_best_name(record)}`: the best candidate")
    if record.counters:
        lines.append("- `ncu-details.csv`: the hardware counters per kernel, before and after; `ncu/`: ncu's raw "
                     "output per profiled kernel version")
    return "\n".join(lines)


def _best_name(record: RunRecord) -> str:
    suffix = Path(str(record.start.get("kernel_file", "x.py"))).suffix or ".py"
    return f"best{suffix}"


# ---------------------------------------------------------------------------------------- plot


def render_plot(record: RunRecord, path: str | Path) -> str | None:
    """Draw plot.png; returns None when drawn, else why it was skipped."""
    try:
        import matplotlib  # optional (the plot extra): only here, where it draws
    except ImportError:
        return "matplotlib is not installed (pip install 'kforge-bot[plot]' to get plot.png)"
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt  # after choosing the backend

    roofline = roofline_missing(record) is None  # a panel only where it can show the roof and the kernel under it
    fig, axes = plt.subplots(1, 3 if roofline else 2, figsize=(17 if roofline else 12, 4.5))
    try:
        _speedup_panel(axes[0], record)
        _shapes_panel(axes[1], record)
        if roofline:
            _roofline_panel(axes[2], record)
        fig.suptitle(f"kforge-bot optimize: {record.start.get('kernel', '?')} on {record.start.get('target', '?')}")
        fig.tight_layout()
        fig.savefig(str(path), dpi=110)
    finally:
        plt.close(fig)
    return None


def _speedup_panel(ax: Any, record: RunRecord) -> None:
    done = record.completed
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="kernel as written")
    correct = [it for it in done if it.verdict == "pass" and it.speedup is not None]
    for accepted, color, marker, label in ((False, "tab:blue", "o", "correct, not accepted"),
                                           (True, "tab:green", "*", "accepted (new best)")):
        pts = [it for it in correct if it.accepted == accepted]
        if not pts:
            continue
        ys = [float(it.speedup or 0.0) for it in pts]
        lo = [y - it.speedup_ci[0] if it.speedup_ci else 0.0 for y, it in zip(ys, pts)]
        hi = [it.speedup_ci[1] - y if it.speedup_ci else 0.0 for y, it in zip(ys, pts)]
        ax.errorbar([it.iteration for it in pts], ys, yerr=[lo, hi], fmt=marker, color=color,
                    markersize=11 if accepted else 6, capsize=3, label=label)
    failed = [it for it in done if it not in correct]
    floor = min([1.0] + [float(it.speedup_ci[0]) for it in correct if it.speedup_ci]) * 0.9
    if failed:
        ax.scatter([it.iteration for it in failed], [floor] * len(failed), marker="x", color="tab:red",
                   label="failed (" + ", ".join(sorted({it.verdict for it in failed})) + ")")
    if done:
        best, xs, ys = 1.0, [0], [1.0]
        for it in done:
            if it.accepted and it.speedup is not None:
                best = float(it.speedup)
            xs.append(it.iteration)
            ys.append(best)
        ax.step(xs, ys, where="post", color="tab:green", alpha=0.5, label="best so far")
    ax.set_xlabel("iteration")
    ax.set_ylabel("speedup over the kernel as written (95% CI)")
    ax.set_title("speedup per iteration")
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)


def _shapes_panel(ax: Any, record: RunRecord) -> None:
    """The best's speedup on each shape set (the table of report.md's "Per shape set"), regressions in red."""
    shown = _shown(record)
    ax.set_title("speedup per shape set" + ("" if shown is None or shown is record.best else
                                             f" (iteration {shown.iteration}, not accepted)"))
    if shown is None or not shown.per_shape:
        ax.text(0.5, 0.5, "no correct, timed candidate", ha="center", va="center")
        ax.set_axis_off()
        return
    sets = shown.per_shape
    xs = list(range(len(sets)))
    ys = [p.speedup for p in sets]
    lo = [p.speedup - p.ci[0] if p.ci else 0.0 for p in sets]
    hi = [p.ci[1] - p.speedup if p.ci else 0.0 for p in sets]
    colors = ["tab:red" if p.regressed else "tab:grey" if p.informational else "tab:green" for p in sets]
    ax.bar(xs, ys, color=colors, yerr=[lo, hi], capsize=3)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="kernel as written")
    ax.set_xticks(xs, [p.label.replace(" (", "\n(") for p in sets], fontsize=7)
    ends = [v for p in sets for v in (p.ci or (p.speedup, p.speedup))] + [1.0]
    if max(ends) / max(min(ends), 1e-12) >= 10:  # a log axis where the sets span a decade; linear inside one
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis, "{:g}x")
    else:
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    ax.set_ylabel("speedup (95% CI; red: regression)")
    ax.legend(fontsize=8, loc="best")


def _plain_log_ticks(axis: Any, form: str) -> None:
    """A log axis ticked at 1, 2, 5 of each decade and labelled as people write numbers (0.5x, 2x, 200), never
    matplotlib's "2x10^0" for a range inside one decade."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: form.format(float(f"{value:.3g}"))))
    axis.set_minor_formatter(NullFormatter())


def roofline_missing(record: RunRecord) -> str | None:
    """Why no roofline can be drawn for this run (None: it can): it needs the kernel's FLOPs and arithmetic
    intensity, and the device's bandwidth and compute ceilings."""
    base = record.position("baseline")
    if not base:
        return (record.workload or {}).get("error") or "bytes per call or times unknown"
    ceilings = record.ceilings or {}
    if not base.get("flops_known") or not base.get("arithmetic_intensity"):
        return "the kernel's FLOP count is unknown"
    if not ceilings.get("bandwidth_gbs") or not (ceilings.get("tflops") or {}).get(base.get("precision", "fp32")):
        return "no ceilings known for this device: `kforge-bot doctor --save` measures them"
    return None


def _roofline_panel(ax: Any, record: RunRecord) -> None:
    """The roof (bandwidth slope, compute ceiling) and the kernel as written and the best under it."""
    base, best = record.position("baseline"), record.position("best")
    ceilings = record.ceilings or {}
    bw = ceilings["bandwidth_gbs"]
    precision = base.get("precision", "fp32")
    peak = ceilings["tflops"][precision]
    ax.set_title("roofline position")
    ridge = peak * 1e3 / bw  # FLOP/byte where the bandwidth slope meets the compute ceiling
    intensities = [p["arithmetic_intensity"] for p in (base, best) if p]
    lo, hi = min(*intensities, ridge) / 10, max(*intensities, ridge) * 10  # the slope, the ridge and the kernel
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    ax.loglog(xs, [min(peak, x * bw / 1e3) for x in xs], color="black", label=f"roof ({ceilings.get('origin')})")
    ax.axvline(ridge, color="black", linestyle=":", linewidth=0.8)
    _plain_log_ticks(ax.xaxis, "{:g}")
    _plain_log_ticks(ax.yaxis, "{:g}")
    for pos, color, label in ((base, "tab:grey", "kernel as written"), (best, "tab:green", "best")):
        if pos:
            ax.scatter([pos["arithmetic_intensity"]], [pos["achieved_tflops"]], color=color, s=60,
                       label=f"{label}: {pos['roofline_fraction']:.0%} of roof")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel(f"{precision} TFLOP/s")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")


# ---------------------------------------------------------------------------------------- formatting


def _speed(it: IterationRecord) -> str:
    if it.speedup is None:
        return "-"
    if it.speedup_ci:
        return f"{it.speedup:.3f}x ({it.speedup_ci[0]:.3f}-{it.speedup_ci[1]:.3f})"
    return f"{it.speedup:.3f}x"


def _ms(value: Any) -> str:
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    return f"{value * 1000:.1f} us" if value < 1 else f"{value:.3f} ms"


def _num(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) else "n/a"


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


