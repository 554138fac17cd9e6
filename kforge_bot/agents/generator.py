"""The generator agent: a prompt per kernel language, and a parser for its reply.

`build_messages(...)` assembles the chat messages from plain values: the target's hardware facts,
the spec's contract, the current best source, the failures so far (compile errors, crashes,
correctness diffs), the analyst's recommendations and optional working implementations for other
targets (KForge's cross-platform reference). Its reply is read by kforge_bot.agents.reply_parser.

Everything here is pure: no torch, no network.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import PurePath
from string import Template
from typing import Any, Mapping, Sequence

from kforge_bot.errors import KforgeError, MalformedReply
from kforge_bot.evaluate.wire.heldout import LABEL_PREFIX

# Kernel language -> (prompt guide file, title). "triton" picks its XPU guide on xpu targets.
_GUIDES: dict[str, tuple[str, str]] = {
    "triton": ("generator_triton.md", "Triton"),
    "triton_xpu": ("generator_triton_xpu.md", "Triton (Intel XPU backend)"),
    "cuda": ("generator_cuda.md", "CUDA C++"),
    "c": ("generator_cpp.md", "C"),
    "cpp": ("generator_cpp.md", "C++"),
    "sycl": ("generator_sycl.md", "SYCL"),
}
_TARGET_TITLES = {"cuda": "NVIDIA GPUs (CUDA)", "xpu": "Intel GPUs (XPU)", "cpu": "the CPU", "mps": "Apple GPUs (MPS)"}

_SUFFIX_FORMAT = {
    ".py": "python", ".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".cc": "cpp", ".cxx": "cpp",
    ".hpp": "cpp", ".h": "c", ".c": "c",
}

MAX_HISTORY = 6  # failures shown in a prompt (newest); older ones only counted
MAX_MESSAGE_CHARS = 3000  # per failure message: compilers put the first error first, keep head and tail


def kernel_language(spec_language: str, target_kind: str) -> str:
    """The language the generator writes in: the spec's own, or for a plain-PyTorch spec the natural
    kernel language of the target. Returns a key of the guides ("triton", "triton_xpu", "cuda", ...)."""
    lang = spec_language.lower()
    if lang == "torch":
        lang = {"cuda": "triton", "xpu": "triton", "cpu": "cpp"}.get(target_kind, "")
        if not lang:
            raise KforgeError(
                f"no generator prompt for a PyTorch kernel on target '{target_kind}'",
                hint="write a first kernel in a supported language (triton, cuda, cpp, sycl) by hand",
            )
    if lang == "triton" and target_kind == "xpu":
        return "triton_xpu"
    if lang not in _GUIDES:
        raise KforgeError(f"no generator prompt for kernel language '{spec_language}'", hint=f"one of {', '.join(sorted(_GUIDES))}")
    return lang


def source_format(filename: str | None) -> str:
    """'python' (Triton, load_inline wrappers, KernelBench files), 'cuda', 'cpp' or 'c', from the suffix."""
    if not filename:
        return "python"
    return _SUFFIX_FORMAT.get(PurePath(filename).suffix.lower(), "python")


def load_prompt(name: str) -> str:
    return resources.files("kforge_bot.agents").joinpath("prompts", name).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------------
# History: what went wrong so far, as plain dicts the loop can store in its trajectory.


# A failure on a held-out variant (kforge_bot.evaluate.wire.heldout) is told as this line alone: which sizes, values or
# seed failed would let the next candidate fit those too.
HELD_OUT_FEEDBACK = ("incorrect on a held-out shape: the kernel was also checked on sizes and input values that are "
                     "not listed (which ones is not shown); it must work for any size and values the inputs allow, "
                     "not only the listed ones")


def failure_from_result(result: Mapping[str, Any], *, iteration: int | None = None, source: str | None = None) -> dict[str, Any]:
    """A history entry from an evaluation result dict (verdict, reason, correctness, speedup...).

    Keeps only what the model needs: the verdict, the reason (compile log, crash message), the
    outputs that failed with their errors and tolerances, and the speedup of a correct but slower
    candidate. `source` (the failed file) lets the next prompt show the model what to repair."""
    correctness = result.get("correctness") or {}
    outputs = [dict(o) for o in correctness.get("outputs") or []]
    for record in correctness.get("records") or []:  # the harness's per-case records
        if str(record.get("case") or "").startswith(LABEL_PREFIX):
            continue  # a held-out case's sizes, values and seed are never shown
        where = {k: record[k] for k in ("case", "shape_set", "seed") if record.get(k) is not None}
        outputs += [{**o, **where} for o in record.get("outputs") or []]
    bad = [o for o in outputs if not o.get("ok", True)]
    reason = str(result.get("reason") or "")
    if LABEL_PREFIX in reason:
        reason = HELD_OUT_FEEDBACK
    entry: dict[str, Any] = {
        "iteration": iteration,
        "verdict": str(result.get("verdict", "unknown")),
        "reason": reason,
        "outputs": bad,
        "speedup": result.get("speedup"),
        "speedup_ci": list(result["speedup_ci"]) if result.get("speedup_ci") else None,
    }
    if source is not None:
        entry["source"] = source
    return entry


def failure_from_malformed(error: MalformedReply, *, iteration: int | None = None, reply: str | None = None) -> dict[str, Any]:
    """A history entry for a reply that could not be used."""
    entry: dict[str, Any] = {"iteration": iteration, "verdict": "malformed", "reason": error.feedback, "outputs": []}
    if reply is not None:
        entry["reply_excerpt"] = _head_and_tail(reply, 600)
    return entry


# ---------------------------------------------------------------------------------------------------
# Prompt assembly.


def contract_from_spec(spec: Any) -> dict[str, Any]:
    """The contract fields of a KernelSpec-like object (read by attribute name, so no import)."""
    keys = ("name", "format", "language", "entry", "kernel_file", "signature", "shape_sets", "tolerance", "forbidden", "notes")
    contract = {k: getattr(spec, k) for k in keys if getattr(spec, k, None) is not None}
    if "kernel_file" in contract:
        contract["kernel_file"] = str(contract["kernel_file"])
    return contract


def build_messages(
    *,
    language: str,
    target_kind: str,
    hardware: Mapping[str, Any] | str,
    contract: Mapping[str, Any],
    current_source: str,
    history: Sequence[Mapping[str, Any]] = (),
    recommendations: Sequence[str] = (),
    references: Sequence[Mapping[str, Any]] = (),
    best_speedup: float | None = None,
    max_history: int = MAX_HISTORY,
    max_message_chars: int = MAX_MESSAGE_CHARS,
) -> list[dict[str, str]]:
    """The generator's chat messages: [system, user].

    language: the spec's language ("triton", "cuda", "c", "cpp", "sycl" or "torch"; see kernel_language)
    hardware: facts about the target (name, peak bandwidth, SM count, ...) as a dict, or ready text
              (e.g. RunnerFacts.prompt_text()); shown as given
    contract: name, entry, kernel_file, signature, shape_sets, tolerance, forbidden (framework ops)...
    history: failure entries (failure_from_result / failure_from_malformed), oldest first
    references: [{"target", "language", "source", "note"?}] working code for other targets
    best_speedup: None while the current source is the baseline, else its speedup over it
    """
    lang = kernel_language(language, target_kind)
    guide_file, title = _GUIDES[lang]
    filename = str(contract.get("kernel_file") or "kernel.py")
    fmt = source_format(filename)
    fence = fence_tag(fmt)
    entry = str(contract.get("entry") or "")
    system = Template(load_prompt("generator_system.md")).substitute(
        language_title=title,
        target_title=_TARGET_TITLES.get(target_kind, target_kind),
        fence=fence,
        filename=PurePath(filename).name,
        entry=entry or "the entry point",
        language_guide=load_prompt(guide_file).strip(),
    )
    sections = [
        _task_section(contract, target_kind, hardware, best_speedup),
        _hardware_section(hardware),
        _contract_section(contract),
        _current_section(current_source, fence, best_speedup),
        _references_section(references),
        _recommendations_section(recommendations),
        _history_section(history, fence, max_history, max_message_chars),
        _instructions(history, recommendations, fence, filename),
    ]
    user = "\n\n".join(s for s in sections if s)
    return [{"role": "system", "content": system.strip() + "\n"}, {"role": "user", "content": user + "\n"}]


def _fenced(content: str, tag: str) -> str:
    """A fenced block that the content cannot close early (a longer fence than any run inside)."""
    longest = max((len(m) for m in re.findall(r"`{3,}", content)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{tag}\n{content.rstrip()}\n{fence}"


def fence_tag(fmt: str) -> str:
    return {"python": "python", "cuda": "cuda", "cpp": "cpp", "c": "c"}[fmt]


def _task_section(contract: Mapping[str, Any], target_kind: str, hardware: Mapping[str, Any] | str, best: float | None) -> str:
    name = contract.get("name") or contract.get("entry") or "the kernel"
    device = (hardware.get("name") if isinstance(hardware, Mapping) else None) or target_kind
    where = f" (`{contract['kernel_file']}`)" if contract.get("kernel_file") else ""
    goal = "Make it faster" if best is None else f"The current best is {best:.2f}x the baseline; make it faster still"
    return f"# Task\nOptimize `{name}`{where} for {device} (target `{target_kind}`). {goal}, keeping it correct."


def _hardware_section(hardware: Mapping[str, Any] | str) -> str:
    if not hardware:
        return ""
    if isinstance(hardware, str):
        return "## Target hardware\n" + hardware.strip()
    lines = [f"- {k}: {_inline(v)}" for k, v in hardware.items() if v not in (None, "", [], {})]
    return "## Target hardware\n" + "\n".join(lines)


def _contract_section(contract: Mapping[str, Any]) -> str:
    lines = []
    if contract.get("entry") == "ModelNew" or contract.get("format") == "kernelbench":
        lines.append(
            "- KernelBench format: define `class ModelNew(nn.Module)` with the same `__init__` arguments and "
            "`forward` signature as `Model`, computing the same outputs with your kernels"
        )
    elif contract.get("format") == "gpumode":
        lines.append(
            "- GPU MODE format: define `custom_kernel(data)`, taking the one `data` object `ref_kernel(data)` takes "
            "(what `generate_input` returns; where it holds an output tensor the reference writes and returns, write "
            "and return that one) and returning what `ref_kernel` returns; the problem's `task` and `utils` modules "
            "import as usual"
        )
    elif contract.get("entry"):
        lines.append(f"- entry: `{contract['entry']}` (keep its name and signature)")
    if contract.get("signature"):
        lines.append(f"- signature: `{contract['signature']}`")
    if contract.get("language"):
        lines.append(f"- kernel language: {contract['language']}")
    shape_sets = contract.get("shape_sets") or []
    if shape_sets:
        lines.append("- inputs are checked and timed on these shape sets (shapes and dtypes):")
        lines += [f"  {i}. {_inline(s)}" for i, s in enumerate(shape_sets, 1)]
    tol = contract.get("tolerance")
    lines.append(f"- tolerance: {_inline(tol)}" if tol else "- tolerance: the harness's default for each dtype")
    forbidden = contract.get("forbidden") or []
    if forbidden:
        lines.append(f"- must not call: {', '.join(f'`{f}`' for f in forbidden)} (the operation it replaces), nor an equivalent")
    else:
        lines.append("- must not call the framework operation it replaces, nor an equivalent library routine")
    if contract.get("notes"):
        lines.append(f"- notes: {contract['notes']}")
    return "## Contract\n" + "\n".join(lines)


def _current_section(source: str, fence: str, best: float | None) -> str:
    label = "the baseline, as written" if best is None else f"correct, {best:.2f}x the baseline"
    return f"## Current best ({label})\n" + _fenced(source, fence)


def _references_section(references: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for ref in references:
        src = str(ref.get("source") or "").rstrip()
        if not src:
            continue
        target = ref.get("target", "another target")
        lang = ref.get("language", "")
        tag = fence_tag(source_format(ref.get("file")))
        note = f" {ref['note']}" if ref.get("note") else ""
        parts.append(
            f"### Working implementation for `{target}`{f' ({lang})' if lang else ''}\n"
            f"Verified correct on that target.{note} Use its algorithm and structure as a guide, "
            f"and adapt it to this target's language and hardware; do not copy device-specific parts.\n"
            + _fenced(src, tag)
        )
    return "## Reference implementations for other targets\n" + "\n\n".join(parts) if parts else ""


def _recommendations_section(recommendations: Sequence[str]) -> str:
    if not recommendations:
        return ""
    items = "\n".join(f"{i}. {r}" for i, r in enumerate(recommendations, 1))
    return f"## Performance analyst's recommendations (ranked, from the latest profile)\n{items}"


def _history_section(history: Sequence[Mapping[str, Any]], fence: str, max_history: int,
                     max_message_chars: int = MAX_MESSAGE_CHARS) -> str:
    if not history:
        return ""
    shown = list(history)[-max_history:] if max_history > 0 else []
    older = len(history) - len(shown)
    parts = [f"({older} earlier attempts not shown.)"] if older else []
    parts += [_render_failure(h, max_message_chars) for h in shown]
    if not shown:
        return "## Attempts so far\n" + parts[0]
    last = shown[-1]
    if last.get("source") and last.get("verdict") not in ("pass",):
        parts.append("### Your last attempt (the one that failed)\n" + _fenced(str(last["source"]), fence))
    return "## Attempts so far (oldest first)\n" + "\n\n".join(parts)


_VERDICT_TITLES = {
    "compile_error": "did not compile",
    "crash": "crashed",
    "timeout": "timed out",
    "incorrect": "wrong results",
    "rejected": "rejected by the harness",
    "malformed": "reply not usable",
    "pass": "correct but not faster",
}


def _render_failure(h: Mapping[str, Any], max_message_chars: int = MAX_MESSAGE_CHARS) -> str:
    verdict = str(h.get("verdict", "unknown"))
    it = h.get("iteration")
    head = f"### Attempt {it}: {_VERDICT_TITLES.get(verdict, verdict)}" if it is not None else f"### {_VERDICT_TITLES.get(verdict, verdict)}"
    lines = [head]
    if verdict == "pass" and h.get("speedup") is not None:
        ci = h.get("speedup_ci")
        ci_text = f" (95% interval {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""
        lines.append(f"Correct, speedup {float(h['speedup']):.3f}x{ci_text}: not better than the current best.")
    reason = str(h.get("reason") or "").strip()
    if reason:
        lines.append(_fenced(_head_and_tail(reason, max_message_chars), "text"))
    outputs = h.get("outputs") or []
    if outputs:
        lines.append(_outputs_table(outputs))
    return "\n".join(lines)


def _outputs_table(outputs: Sequence[Mapping[str, Any]]) -> str:
    """Correctness diffs, one line per failing output: which output, where, how far off, the tolerance."""
    lines = ["Outputs outside the tolerance:"]
    for o in outputs[:8]:
        what = f"output {o.get('index', '?')}"
        meta = ", ".join(str(x) for x in (o.get("dtype"), f"shape {o['shape']}" if o.get("shape") else None) if x)
        if meta:
            what += f" ({meta})"
        if o.get("case"):
            what += f" in case \"{o['case']}\""
        if o.get("shape_set") not in (None, {}):
            what += f" with shape set {_inline(o['shape_set'])}"
        errors = []
        for key, label in (("max_abs", "max abs error"), ("max_rel", "max rel error"), ("rel_norm", "relative norm error")):
            if o.get(key) is not None:
                errors.append(f"{label} {_num(o[key])}")
        tol = ", ".join(f"{k} {_num(o[k])}" for k in ("atol", "rtol") if o.get(k) is not None)
        line = f"- {what}: " + ("; ".join(errors) if errors else "wrong")
        if tol:
            line += f" (tolerance {tol})"
        if o.get("problem"):
            line += f": {o['problem']}"
        lines.append(line)
    if len(outputs) > 8:
        lines.append(f"- ... and {len(outputs) - 8} more failing outputs")
    return "\n".join(lines)


def _instructions(history: Sequence[Mapping[str, Any]], recommendations: Sequence[str], fence: str, filename: str) -> str:
    last = history[-1] if history else None
    if last is not None and last.get("verdict") in ("compile_error", "crash", "timeout", "incorrect", "rejected"):
        what = "Your last attempt failed (see above). Find the cause and fix it"
        if recommendations:
            what += "; keep the analyst's recommendations in mind"
    elif last is not None and last.get("verdict") == "malformed":
        what = "Your last reply could not be used (see above). Send the file in the required form"
    elif last is not None and last.get("verdict") == "pass":
        what = "Your last attempt was correct but not faster. Try a different optimization"
    elif recommendations:
        what = "Apply the analyst's top recommendation (or the next one if it does not apply)"
    else:
        what = "Find the main bottleneck for this hardware and remove it"
    return (
        f"## Now\n{what}. Reply with exactly one ```{fence} block holding the complete "
        f"`{PurePath(filename).name}`."
    )


# ---------------------------------------------------------------------------------------------------
# Small formatting helpers.


def _head_and_tail(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    head = int(limit * 0.8)
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"


def _inline(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
