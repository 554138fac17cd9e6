"""The analyst agent: reads a profile digest, returns a short ranked list of concrete changes.

`build_messages(digest=..., ...)` renders the digest (per-kernel times from the framework profiler,
ncu speed-of-light metrics when present, the roofline position against the target's ceilings) into a
prompt; `parse_recommendations(reply)` takes the numbered list out of the reply, or raises
`MalformedReply`. The digest is a plain dict; known keys are rendered as tables, anything else is shown
as compact JSON, so a richer digest never breaks the prompt.

Digest keys read when present:
    kernels: [{"name", "time_us" | "time_ms", "calls", "share", ...}]   framework profiler
    ncu: {kernel: {metric: value}} | [{"kernel", metric: value}] | {metric: value}
         (e.g. sm_throughput_pct, dram_throughput_pct, achieved_occupancy_pct, registers_per_thread, spill_bytes)
    roofline: {"achieved_gbps", "peak_gbps", "achieved_tflops", "peak_tflops", "fraction", "bound", ...}
"""

from __future__ import annotations

import json
import re
from string import Template
from typing import Any, Mapping, Sequence

from kforge_bot.agents.generator import load_prompt, source_format
from kforge_bot.counters import ncu_parse
from kforge_bot.errors import MalformedReply
from kforge_bot.tuner.search import profile_hint

MAX_ITEMS = 5
MAX_ITEM_CHARS = 500
MAX_REPLY_TOKENS = 1024  # five items of MAX_ITEM_CHARS and a line of reasoning; the endpoint's max_tokens caps it
_TABLE_ROWS = 12


def build_messages(
    *,
    digest: Mapping[str, Any],
    hardware: Mapping[str, Any] | str | None = None,
    contract: Mapping[str, Any] | None = None,
    source: str | None = None,
    language: str | None = None,
    tried: Sequence[str] = (),
    speedup: float | None = None,
    max_items: int = MAX_ITEMS,
) -> list[dict[str, str]]:
    """The analyst's chat messages: [system, user].

    digest: the profile digest of the current best kernel (see the module docstring)
    tried: one line per earlier step ("num_warps 4 -> 8: 1.12x", "fused the bias: incorrect"), so the
           analyst does not repeat advice that already failed
    speedup: the current best's speedup over the baseline, when it is not the baseline itself"""
    system = Template(load_prompt("analyst.md")).substitute(max_items=max_items)
    name = (contract or {}).get("name") or (contract or {}).get("entry") or "the kernel"
    device = (hardware.get("name") if isinstance(hardware, Mapping) else None) or "the target"
    status = "the baseline as written" if speedup is None else f"the current best, {speedup:.2f}x the baseline"
    parts = [f"# Profile of `{name}` on {device} ({status})"]
    if isinstance(hardware, str) and hardware.strip():
        parts.append("## Target ceilings and facts\n" + hardware.strip())
    elif isinstance(hardware, Mapping) and hardware:
        parts.append("## Target ceilings and facts\n" + "\n".join(f"- {k}: {_inline(v)}" for k, v in hardware.items() if v not in (None, "", [], {})))
    parts.append(render_digest(digest))
    if tried:
        parts.append("## Already tried (do not repeat what failed)\n" + "\n".join(f"- {t}" for t in tried))
    if source:
        tag = source_format((contract or {}).get("kernel_file"))
        fence = "`" * max(3, max((len(m) for m in re.findall(r"`{3,}", source)), default=2) + 1)
        lang = f" ({language})" if language else ""
        parts.append(f"## Current source{lang}\n{fence}{tag}\n{source.rstrip()}\n{fence}")
    parts.append(f"Give at most {max_items} ranked, concrete recommendations as a numbered list under \"Recommendations:\".")
    return [{"role": "system", "content": system.strip() + "\n"}, {"role": "user", "content": "\n\n".join(parts) + "\n"}]


def render_digest(digest: Mapping[str, Any]) -> str:
    """The digest as Markdown: what the analyst reads (and what a report can show)."""
    if not digest:
        return "## Profile\n(no profile data was collected)"
    parts = []
    hint = profile_hint(digest)
    if hint:
        reading = {"registers": "occupancy capped by registers (or spills)", "occupancy": "under-occupied"}
        parts.append(f"Heuristic reading of the numbers below: {reading.get(hint, hint + '-bound')}.")
    kernels = digest.get("kernels")
    if isinstance(kernels, Sequence) and not isinstance(kernels, str) and kernels:
        rows = sorted((k for k in kernels if isinstance(k, Mapping)), key=_kernel_time, reverse=True)
        parts.append("## Per-kernel times (framework profiler)\n" + _table(rows))
    ncu = digest.get("ncu")
    if ncu:
        summary = digest.get("ncu_summary") or {}
        head = f"## Hardware counters ({digest.get('counters_tool') or 'Nsight Compute'})\n"
        if summary.get("class"):
            light = summary.get("speed_of_light")
            head += (f"Roofline class by the counters: {summary['class']}"
                     + (f", {100.0 * float(light):.0f}% of speed of light" if light is not None else "") + ".\n")
        parts.append(head + _ncu_table(ncu, digest.get("ncu_before")))
    roof = digest.get("roofline")
    if isinstance(roof, Mapping) and roof:
        parts.append("## Roofline position\n" + _roofline(roof))
    if isinstance(digest.get("device_us"), (int, float)):
        parts.append(f"Device time per call: {float(digest['device_us']):.4g} us.")
    ops = digest.get("compute_ops")
    if ops:
        parts.append("Framework compute ops called: " + ", ".join(f"`{o}`" for o in list(ops)[:20]))
    if digest.get("side_stream_kernels"):
        parts.append("Kernels on a side stream (timed only if joined back to the current stream before the call "
                     "returns): " + ", ".join(digest["side_stream_kernels"][:5]))
    rest = {k: v for k, v in digest.items() if k not in _RENDERED and k not in _NOISE}
    if rest:
        parts.append("## Other profile data\n" + _cut(json.dumps(rest, default=str, sort_keys=True), 1500))
    return "\n\n".join(parts)


_RENDERED = ("kernels", "ncu", "ncu_before", "ncu_summary", "roofline", "device_us", "compute_ops", "side_stream_kernels")
_NOISE = ("ops", "streams", "current_stream", "streams_checked")  # bookkeeping of the harness


def _kernel_time(k: Mapping[str, Any]) -> float:
    for key, scale in (("us", 1.0), ("time_us", 1.0), ("time_ms", 1000.0), ("total_us", 1.0), ("self_time_us", 1.0)):
        v = k.get(key)
        if isinstance(v, (int, float)):
            return float(v) * scale
    return 0.0


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows[:_TABLE_ROWS]:
        lines.append("| " + " | ".join(_cell(r.get(c)) for c in cols) + " |")
    if len(rows) > _TABLE_ROWS:
        lines.append(f"({len(rows) - _TABLE_ROWS} more rows not shown)")
    return "\n".join(lines)


def _ncu_table(ncu: Any, before: Any = None) -> str:
    if _digest_rows(ncu):  # the collector's rows (kforge_bot.counters.ncu_parse): before and after in one table
        return ncu_parse.table(before if _digest_rows(before) else None, list(ncu))
    if isinstance(ncu, Mapping) and ncu and all(isinstance(v, Mapping) for v in ncu.values()):
        rows = [{"kernel": k, **v} for k, v in ncu.items()]
    elif isinstance(ncu, Mapping):
        rows = [dict(ncu)]
    elif isinstance(ncu, Sequence) and not isinstance(ncu, str):
        rows = [dict(r) for r in ncu if isinstance(r, Mapping)]
    else:
        return _cut(str(ncu), 1500)
    return _table(rows)


def _digest_rows(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str) and bool(value) and all(
        isinstance(r, Mapping) and "kernel" in r and "duration_us" in r for r in value)


def _roofline(roof: Mapping[str, Any]) -> str:
    lines = []
    for k, v in roof.items():
        if k.endswith("fraction") and isinstance(v, (int, float)):
            what = {"fraction": "roofline ceiling", "roofline_fraction": "roofline ceiling at this intensity",
                    "bandwidth_fraction": "peak bandwidth", "compute_fraction": "peak FLOP/s"}.get(k, k)
            lines.append(f"- {k}: {100.0 * float(v):.1f}% of the {what}")
        else:
            lines.append(f"- {k}: {_cell(v)}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# Reply parsing.

_ITEM = re.compile(r"^\s{0,3}(?:[-*]\s+)?(?:\*\*)?(?P<n>\d{1,2})[.)](?:\*\*)?\s+(?P<text>\S.*)$")
_HEADING = re.compile(r"recommend", re.I)


def parse_recommendations(reply: str, max_items: int = MAX_ITEMS) -> list[str]:
    """The ranked recommendations in the reply: the numbered list under a "Recommendations" heading if
    there is one, else the last numbered list. Continuation lines join their item; markdown emphasis is
    dropped; at most `max_items`. No list at all: MalformedReply with feedback."""
    if not reply or not reply.strip():
        raise MalformedReply("the reply was empty; answer with a numbered list of recommendations under \"Recommendations:\"")
    if "```" in reply:
        reply = re.sub(r"```.*?(?:```|\Z)", "", reply, flags=re.S)  # code is the generator's job
    lists: list[tuple[bool, list[list[str]]]] = []  # (under a recommendations heading, items)
    heading_seen = False
    current: list[list[str]] | None = None
    for line in reply.splitlines():
        m = _ITEM.match(line)
        if m:
            n = int(m.group("n"))
            if current is None or n == 1 or n != len(current) + 1:
                current = []
                lists.append((heading_seen, current))
                heading_seen = False
            current.append([m.group("text").strip()])
        elif not line.strip():
            continue
        elif current is not None and line.startswith((" ", "\t")) and current:
            current[-1].append(line.strip())  # an item's continuation line
        else:
            current = None
            heading_seen = bool(_HEADING.search(line))
    if not lists:
        raise MalformedReply(
            "the reply had no numbered list; answer with at most "
            f"{max_items} ranked, concrete recommendations as '1. ...', '2. ...' under \"Recommendations:\""
        )
    chosen = next((items for under, items in lists if under), lists[-1][1])
    out = []
    for item in chosen[:max_items]:
        text = _plain(" ".join(item))
        if text:
            out.append(text if len(text) <= MAX_ITEM_CHARS else text[: MAX_ITEM_CHARS - 3].rstrip() + "...")
    if not out:
        raise MalformedReply("the numbered list was empty; give concrete recommendations")
    return out


def _plain(text: str) -> str:
    text = re.sub(r"\*\*(.+?)\*\*|__(.+?)__", lambda m: m.group(1) or m.group(2), text)
    return re.sub(r"\s+", " ", text).strip()


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (dict, list, tuple)):
        return _inline(v)
    return str(v).replace("|", "\\|")


def _inline(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, default=str)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 20] + " ... (cut)"
