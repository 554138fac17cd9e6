"""The static dashboard: an index and one page per kernel, each shape set's time over the main line's commits with
its interval, change points and acknowledgements marked, commits linked. Plain HTML and inline SVG: no script, no
asset from elsewhere, so GitHub Pages (or a file:// URL) shows it as written.

Everything a commit or a person wrote (subjects, kernel names, reasons) is escaped text, never markup nor a link; the
only links are to the kernel pages and to commits, built from a trusted base URL and a sha checked to be hex.
"""

from __future__ import annotations

import hashlib
import html
import math
import os
import re
from pathlib import Path

from kforge_bot.github.actions import Actions
from kforge_bot.history.changes import ChangePoint
from kforge_bot.history.report import HistoryReport
from kforge_bot.history.runner import slug
from kforge_bot.history.series import Series

WIDTH, HEIGHT, PAD = 860, 260, 48
SHA = re.compile(r"^[0-9a-f]{40}$")
# No script, no asset from anywhere: should escaping ever miss, the browser still runs and loads nothing.
CSP = "default-src 'none'; style-src 'unsafe-inline'"
STYLE = """body{font:14px system-ui,sans-serif;margin:24px;max-width:960px;color:#222}
table{border-collapse:collapse;margin:8px 0 24px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}
.open{color:#b00020}.ack{color:#666}.faster{color:#1b7f2a}svg{background:#fafafa;border:1px solid #ddd}
code{font-size:12px}"""


def commit_base(environ: dict[str, str] | None = None) -> str | None:
    """The commits' web address: KFORGE_COMMIT_URL, else GitHub's from the Actions environment, else none."""
    env = os.environ if environ is None else environ
    if env.get("KFORGE_COMMIT_URL"):
        return env["KFORGE_COMMIT_URL"].rstrip("/")
    return Actions.read(env).commits_url


def commit_link(sha: str, base: str | None) -> str:
    short = html.escape(sha[:10])
    if base and SHA.match(sha) and base.startswith(("https://", "http://")):
        return f'<a href="{html.escape(base)}/{sha}"><code>{short}</code></a>'
    return f"<code>{short}</code>"


def page_name(kernel: str) -> str:
    return f"kernel-{slug(kernel)[:40]}-{hashlib.sha256(kernel.encode()).hexdigest()[:8]}.html"


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{body}</body></html>\n")


def chart(series: Series, changes: list[ChangePoint]) -> str:
    """An SVG of the series: a point per commit with its interval, a vertical line at each change point (red open,
    grey acknowledged, green faster) and a dotted one where the runner's software changed."""
    values = [p.value for p in series.points]
    lows = [p.ci[0] if p.ci else p.value for p in series.points]
    highs = [p.ci[1] if p.ci else p.value for p in series.points]
    # The axis follows the values: a disturbed measurement's interval can be many times the value, and would flatten
    # every step; an interval that leaves the axis is drawn to its edge.
    span = (max(values) - min(values)) or abs(max(values)) * 0.1 or 1.0
    top, bottom = max(values) + 0.3 * span, min(values) - 0.3 * span
    lows = [min(max(v, bottom), top) for v in lows]
    highs = [min(max(v, bottom), top) for v in highs]
    span = top - bottom
    n = len(values)

    def x(i: float) -> float:
        return PAD + (WIDTH - 2 * PAD) * (i / max(n - 1, 1))

    def y(v: float) -> float:
        return HEIGHT - PAD + (v - bottom) / (top - bottom) * (2 * PAD - HEIGHT)

    parts = [f'<svg role="img" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'aria-label="{html.escape(series.part)} over {n} commits">']
    for v in (min(values), max(values)):
        parts.append(f'<text x="4" y="{y(v) + 4:.1f}" font-size="11">{v:.4g}</text>'
                     f'<line x1="{PAD}" x2="{WIDTH - PAD}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
    for i, _ in series.software_changes():
        parts.append(f'<line class="software" x1="{x(i - 0.5):.1f}" x2="{x(i - 0.5):.1f}" y1="{PAD / 2}" '
                     f'y2="{HEIGHT - PAD}" stroke="#1f5fbf" stroke-dasharray="2,3"/>')
    for c in changes:
        colour = "#1b7f2a" if not c.regression else "#888" if c.acknowledged else "#b00020"
        parts.append(f'<line class="change" x1="{x(c.index - 0.5):.1f}" x2="{x(c.index - 0.5):.1f}" y1="{PAD / 2}" '
                     f'y2="{HEIGHT - PAD}" stroke="{colour}" stroke-width="2" stroke-dasharray="6,3"/>'
                     f'<text x="{x(c.index - 0.5) + 3:.1f}" y="{PAD / 2 + 10}" font-size="11" fill="{colour}">'
                     f'{c.size:+.1%}{" (ack)" if c.acknowledged else ""}</text>')
    for i, (v, lo, hi) in enumerate(zip(values, lows, highs)):
        if hi > lo:
            parts.append(f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" stroke="#555"/>')
        parts.append(f'<circle class="point" cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="#222">'
                     f"<title>{html.escape(series.points[i].commit[:10])}: {v:.4g}</title></circle>")
    parts.append(f'<text x="{PAD}" y="{HEIGHT - 12}" font-size="11">commits, oldest first ({n})</text></svg>')
    return "".join(parts)


def kernel_page(name: str, series: list[Series], changes: list[ChangePoint], base: str | None) -> str:
    body = [f'<p><a href="index.html">All kernels</a></p><h1>{html.escape(name)}</h1>']
    for s in series:
        mine = [c for c in changes if (c.kernel, c.part, c.target, c.runner) == (s.kernel, s.part, s.target, s.runner)]
        unit = "time relative to its reference (timed in pairs)" if s.unit == "relative" else "time (ms)"
        body.append(f"<h2>{html.escape(s.part)}</h2><p>{html.escape(s.target)} on <code>{html.escape(s.runner)}"
                    f"</code>: {unit}, with the harness's 95% interval; threshold {s.threshold:.1%}.</p>")
        body.append(chart(s, mine))
        moved = "; ".join(f"at {html.escape(s.points[i].commit[:10])}: " + ", ".join(
            f"{html.escape(k)} {html.escape(a or '?')} to {html.escape(b or '?')}" for k, (a, b) in what.items())
            for i, what in s.software_changes())
        body.append("<p><small>Dashed line: a change point (red open, grey acknowledged, green faster). "
                    + (f"Dotted blue line: the runner's software changed ({moved}).</small></p>" if moved
                       else "</small></p>"))
        if mine:
            body.append("<table><tr><th>change point</th><th>commit</th><th>size</th><th>status</th></tr>")
            for c in mine:
                if c.acknowledged:
                    status = (f'<span class="ack">acknowledged by {html.escape(str(c.acknowledged.get("by", "")))}: '
                              f'{html.escape(str(c.acknowledged.get("reason", "")))}</span>')
                else:
                    status = '<span class="open">open</span>' if c.regression else '<span class="faster">faster</span>'
                body.append(f"<tr><td><code>{html.escape(c.id)}</code></td><td>{commit_link(c.commit, base)} "
                            f"{html.escape(c.subject)}</td><td>{c.size:+.1%} ({c.before:.4g} to {c.after:.4g})</td>"
                            f"<td>{status}</td></tr>")
            body.append("</table>")
        body.append("<details><summary>Every commit</summary><table><tr><th>#</th><th>commit</th><th>value</th>"
                    "<th>interval</th><th>kernel ms</th></tr>")
        for i, p in enumerate(s.points):
            interval = f"{p.ci[0]:.4g} to {p.ci[1]:.4g}" if p.ci else "-"
            ms = f"{p.time_ms:.4g}" if not math.isnan(p.time_ms) else "-"
            body.append(f"<tr><td>{i}</td><td>{commit_link(p.commit, base)} {html.escape(p.subject)}</td>"
                        f"<td>{p.value:.4g}</td><td>{interval}</td><td>{ms}</td></tr>")
        body.append("</table></details>")
    return _page(f"kforge-bot history: {name}", "".join(body))


def write_site(report: HistoryReport, folder: Path, base: str | None = None) -> Path:
    """Write the dashboard into `folder`; the index's path."""
    base = base or commit_base()
    folder.mkdir(parents=True, exist_ok=True)
    kernels: dict[str, list[Series]] = {}
    for s in report.series:
        kernels.setdefault(s.kernel, []).append(s)
    rows = []
    for kernel, series in sorted(kernels.items()):
        changes = [c for c in report.changes if c.kernel == kernel]
        (folder / page_name(kernel)).write_text(kernel_page(series[0].name, series, changes, base), encoding="utf-8")
        opened = sum(1 for c in changes if c.regression and not c.acknowledged)
        rows.append(f'<tr><td><a href="{page_name(kernel)}">{html.escape(series[0].name)}</a></td>'
                    f"<td>{len(series)}</td><td>{len(series[0].points)}</td>"
                    f'<td class="{"open" if opened else ""}">{opened}</td>'
                    f"<td>{sum(1 for c in changes if c.acknowledged)}</td></tr>")
    body = (f"<h1>kforge-bot performance history</h1><p>Main line up to {commit_link(report.rev, base)}, "
            f"{len(report.commits)} commits.</p><table><tr><th>kernel</th><th>series</th><th>commits measured</th>"
            f"<th>open regressions</th><th>acknowledged</th></tr>{''.join(rows)}</table>"
            + "".join(f"<p>{html.escape(n)}</p>" for n in report.notes))
    index = folder / "index.html"
    index.write_text(_page("kforge-bot performance history", body), encoding="utf-8")
    return index
