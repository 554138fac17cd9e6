"""`kforge-bot check REFERENCE [--candidate FILE]`: one evaluation, a verdict and a speedup; `--all [REPO]`:
every managed kernel of a repository against its reference, a line each.

Exit codes: 0 correct, 1 rejected (incorrect, cheating, crash, hang, compile error), 2 usage or
configuration error.
"""

from __future__ import annotations

import ast
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from kforge_bot.commands import (
    examples,
    json_option,
    output_console,
    target_option,
    timing_budget_option,
    write_json,
)
from kforge_bot.config.choices import BASELINE_KINDS
from kforge_bot.config.policy import load_policy
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.api import evaluate, new_seeds
from kforge_bot.evaluate.baselines import against_baselines, measure_compiled, requested_compiled
from kforge_bot.evaluate.isolation import announcement
from kforge_bot.evaluate.references import ReferenceStore
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings, case_breakdown, directions_text
from kforge_bot.evaluate.wire.shapes import DEFINITION, geomean_times, text_lines
from kforge_bot.spec import (
    Implementation,
    KernelSpec,
    defines,
    kernel_implementation,
    load_spec,
)
from kforge_bot.spec.kernels import discover
from kforge_bot.targets import TargetChoice, choose_target


def resolve_candidate(spec: KernelSpec, candidate_path: Path | None) -> tuple[Implementation, Implementation, str]:
    """(candidate, baseline, description) for `check`, following the spec's format.

    - KernelBench: the candidate file's `ModelNew` against `Model`; without --candidate, the problem's own
      `ModelNew` if it has one, else `Model` against itself (an A/A run that shows the harness's noise).
    - Manifest: the candidate file's entry against the kernel as it is on disk; without --candidate, the
      kernel against its reference.
    - GPU MODE: the candidate file's custom_kernel against the problem's ref_kernel; without --candidate, the
      problem's submission.py (ref_kernel against itself where it has none).
    """
    if spec.format == "kernelbench":
        if candidate_path is not None:
            impl = Implementation.from_file(candidate_path, "ModelNew")
            if _parses(impl.source) and not defines(impl.source, "ModelNew"):
                raise KforgeError("defines no class ModelNew", path=candidate_path,
                                  hint="a KernelBench candidate defines ModelNew with Model's constructor and forward")
            return impl, spec.baseline, f"{candidate_path.name}:ModelNew vs {spec.kernel_file}:Model"
        impl = kernel_implementation(spec)
        if impl.symbol == "ModelNew":
            return impl, spec.baseline, f"{spec.kernel_file}: ModelNew vs Model"
        return spec.baseline, spec.baseline, f"{spec.kernel_file}: Model vs itself (A/A: no candidate given)"
    if spec.format == "gpumode":  # the submission's custom_kernel against the problem's ref_kernel
        if candidate_path is None and spec.kernel is not None:
            return spec.kernel, spec.baseline, f"{spec.name}: submission.py:custom_kernel vs reference.py:ref_kernel"
        if candidate_path is None:
            return spec.baseline, spec.baseline, f"{spec.name}: ref_kernel vs itself (A/A: no submission.py)"
        impl = Implementation.from_file(candidate_path, spec.entry, root=spec.root)
        if _parses(impl.source) and not defines(impl.source, spec.entry):
            raise KforgeError(f"defines no top-level {spec.entry!r}", path=candidate_path,
                              hint="a GPU MODE submission defines custom_kernel(data)")
        return impl, spec.baseline, f"{candidate_path.name}:{spec.entry} vs {spec.name}/reference.py:ref_kernel"
    if candidate_path is not None:
        impl = spec.candidate_from_source(Implementation.from_file(candidate_path, spec.entry).source,
                                          candidate_path.name)
        if _parses(impl.source) and not spec.entry_file and not defines(impl.source, spec.entry):
            raise KforgeError(f"defines no top-level {spec.entry!r}", path=candidate_path,
                              hint=f"a candidate for kernel {spec.name!r} defines the same entry as {spec.kernel_file}")
        return impl, spec.baseline, f"{candidate_path.name}:{spec.entry} vs {spec.kernel_file}:{spec.entry}"
    kernel = spec.baseline
    reference = spec.reference
    if reference == kernel:
        return kernel, kernel, f"{spec.kernel_file}:{spec.entry} vs itself (A/A: the manifest names no reference)"
    # The reference's path as the manifest names it where it is the kernel's own file (cpu/x.py, not x.py).
    where = spec.kernel_file if reference.source == kernel.source else reference.filename
    return kernel, reference, f"{spec.kernel_file}:{spec.entry} vs reference {where}:{reference.symbol}"


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


def _parses(source: str) -> bool:
    """A candidate that does not parse is a compile error (exit 1, with the compiler's message), not a usage error."""
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


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


def render(result: EvalResult, title: str) -> None:
    console = output_console()
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
        result.baseline.median_ms if result.baseline else None, result.candidate.median_ms if result.candidate else None)
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


def attach_baselines(result: EvalResult, spec: KernelSpec, eager: Implementation, kinds: tuple[str, ...], target: str,
                     settings: EvalSettings, **kwargs: Any) -> None:
    """The compiled baselines measured (only for a correct, timed candidate: there is nothing to compare otherwise)
    and the candidate's speedups against each, in `details.baselines`."""
    if not (result.correct and result.details.get("timing")):
        result.details["baselines"] = {"note": f"{', '.join(kinds)} not measured: the candidate is "
                                               f"{result.verdict} (or untimed)"}
        return
    compiled = measure_compiled(spec, eager, kinds, evaluate, target, settings, **kwargs)
    result.details["baselines"] = against_baselines(result, compiled)


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


class _Progress:
    """A live line while workers compile, check and time; silent when output is not a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._status: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            self._status = Console(stderr=True).status("starting workers ...")
            self._status.__enter__()
        return self

    def __call__(self, message: dict[str, Any]) -> None:
        if self._status is None or message.get("type") != "progress":
            return
        phase = message.get("phase")
        if phase == "timing" and message.get("ci"):
            lo, hi = message["ci"]
            text = f"timing: {message['pairs']} pairs, {message['speedup']:.3f}x ({lo:.3f}-{hi:.3f})"
        else:
            text = f"{phase}: {message.get('case', '')}"
        self._status.update(text)

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)


@click.command("check", epilog=examples(
    "kforge-bot check examples/kforge.yaml --kernel matmul_bias_relu_cpu    # a manifest kernel vs its reference",
    "kforge-bot check problem.py --candidate problem_new.py --target cuda  # KernelBench: ModelNew vs Model",
    "kforge-bot check problem.py --candidate problem_new.py --json -       # the full report as JSON on stdout",
    "kforge-bot check --all examples --target cpu                          # every kernel a repository manages"))
@click.argument("reference", type=click.Path(path_type=Path), required=False)
@click.option("--all", "all_kernels", is_flag=True,
              help="Check every kernel REFERENCE (a repository folder, default .) manages, as `list` shows them.")
@click.option("--policy", "policy_path", default=None,
              help="Policy file or built-in name: its evaluation settings (seeds, timing budget, timeout, worker "
                   "limits), the isolation default and, with --all, which paths hold kernels. Without one: the default "
                   "policy with a quick look (the kernel's own seeds, 3 s of timing).")
@click.option("--candidate", "candidate_path", type=click.Path(path_type=Path), default=None,
              help="Candidate file (KernelBench: defines ModelNew; manifest kernel: defines the entry).")
@click.option("--kernel", default=None, help="Kernel name, when REFERENCE is a kforge.yaml with several.")
@target_option("Where to run.")
@json_option("The full report.")
@click.option("--seeds", type=click.IntRange(1, 100), default=None,
              help="Correctness seeds per shape set (default: the policy's evaluation.seeds; without --policy, the "
                   "kernel's own).")
@timing_budget_option("Seconds of interleaved timing in this evaluation, at most (default: the policy's "
                      "evaluation.timing_budget_s; without --policy, 3).", maximum=600)
@click.option("--timeout", type=click.FloatRange(1, 7200), default=None,
              help="Seconds before the candidate's process is killed, compilation included (default: the policy's "
                   "evaluation.timeout_s, 300).")
@click.option("--no-timing", is_flag=True, help="Check correctness only.")
@click.option("--allow-fallback", is_flag=True, help="Accept candidates that call the framework op they replace.")
@click.option("--isolation", type=click.Choice(["required", "preferred", "off"]), default=None,
              help="The OS sandbox for the kernel's code: refuse to run without it, use it where the machine "
                   "has it, or never (default: the policy's, preferred in the default policy).")
@click.option("--baseline", "baselines", multiple=True, type=click.Choice(BASELINE_KINDS),
              help="Also time the baseline under torch.compile (compile; compile-max-autotune) and report the "
                   "speedup against it and against the faster of eager and it (default: the policy's baseline).")
def check(reference: Path | None, all_kernels: bool, policy_path: str | None, candidate_path: Path | None,
          kernel: str | None, target: str, json_path: str | None, seeds: int | None, timing_budget: float | None,
          timeout: float | None, no_timing: bool, allow_fallback: bool, isolation: str | None,
          baselines: tuple[str, ...]) -> int:
    """Evaluate a kernel against its reference: correctness, then speed (interleaved, with a 95% CI)."""
    policy = load_policy(policy_path)
    chosen = choose_target(target)
    flags = {"quick": policy_path is None, "seeds": seeds, "timing_budget_s": timing_budget, "timeout_s": timeout,
             "measure": not no_timing, "isolation": isolation, "allow_framework_fallback": allow_fallback or None}

    def settings_for(spec: KernelSpec, kind: str) -> EvalSettings:
        """The policy's settings and its rule for the kernel on `kind`, the flags over them."""
        return policy.eval_settings("check", rule=policy.rule_for(spec.name, spec.kernel_file, kind), **flags)

    isolation = policy.eval_settings("check", **flags).isolation
    if all_kernels:
        if candidate_path is not None or kernel is not None:
            raise KforgeError("--all checks each kernel as written against its reference",
                              hint="drop --candidate and --kernel, or check one kernel without --all")
        return _check_all(reference or Path("."), policy, chosen, settings_for, isolation, json_path)
    if reference is None:
        raise KforgeError("which kernel? give a kernel file, a kforge.yaml or a KernelBench problem",
                          hint="kforge-bot check FILE, or kforge-bot check --all [REPO] for every managed kernel")
    spec = load_spec(reference, kernel)
    candidate, baseline, title = resolve_candidate(spec, candidate_path)
    kind = chosen.device_kind(spec.targets)
    settings = settings_for(spec, kind)
    click.echo(announcement(isolation), err=True)
    quiet_json = json_path is not None and str(json_path) == "-"
    kinds = requested_compiled(baselines or policy.baseline)
    store = ReferenceStore()
    try:
        with _Progress(enabled=sys.stderr.isatty() and not quiet_json) as progress:
            # One set of secret seeds for the candidate and the compiled baselines: one reference run serves both.
            seeds_used = new_seeds(settings.seed_count(spec.seeds))
            result = evaluate(spec, candidate, kind, settings, baseline=baseline, progress=progress,
                              seeds=seeds_used, references=store)
            if kinds:
                attach_baselines(result, spec, baseline, kinds, kind, settings, seeds=seeds_used,
                                 references=store, progress=progress)
    finally:
        store.cleanup()
    report = {"kernel": spec.name, "format": spec.format, "comparison": title, **result.to_dict()}
    write_json(report, json_path)
    if not quiet_json:
        render(result, f"kforge-bot check: {title}")
    return 0 if result.correct else 1


def _check_all(repo: Path, policy: Any, target: TargetChoice, settings_for: Callable[[KernelSpec, str], EvalSettings],
               isolation: str, json_path: str | None) -> int:
    """Every managed kernel of `repo` against its reference, one line each (exit 1 if any is not correct)."""
    if not repo.is_dir():
        raise KforgeError("not a directory", path=repo, hint="with --all, give the repository's root (default .)")
    notes: list[str] = []
    kernels = sorted(discover(repo, policy, strict=True, notes=notes).values(), key=lambda k: k.id)
    if not kernels:
        raise KforgeError("no managed kernels here", path=repo,
                          hint="add a kforge.yaml or KernelBench files within the policy's kernel_paths")
    click.echo(announcement(isolation), err=True)
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    for number, managed in enumerate(kernels, 1):
        # Progress on stderr before each kernel (a long run is never silent), the verdicts on stdout as they come.
        click.echo(f"[{number}/{len(kernels)}] {managed.id} ({time.monotonic() - started:.0f} s so far)", err=True)
        row: dict[str, Any] = {"kernel": managed.id, "file": managed.file}
        if managed.spec is None:
            row.update(verdict="error", reason=f"does not load: {managed.error}")
        else:
            spec = managed.spec
            kind, why = target.kernel_kind(spec.targets)
            if kind is None:
                row.update(verdict="skipped", reason=why)
            else:
                candidate, baseline, title = resolve_candidate(spec, None)
                try:
                    result = evaluate(spec, candidate, kind, settings_for(spec, kind),
                                      baseline=baseline)
                except KforgeError as exc:  # this kernel's reference or inputs fail: the others still run
                    row.update(verdict="error", reason=str(exc), target=kind)
                else:
                    row.update(verdict=result.verdict, reason=result.reason, comparison=title, target=kind,
                               speedup=result.speedup, speedup_ci=result.speedup_ci, report=result.to_dict())
        rows.append(row)
        click.echo(f"{row['kernel']}: {row['verdict']}: {row['reason']}")
        sys.stdout.flush()  # a pipe (a CI log) shows each verdict when it comes, not all of them at the end
    for note in notes:
        click.echo(f"note: {note}", err=True)
    failed = [r for r in rows if r["verdict"] not in ("pass", "skipped")]
    click.echo(f"{len(rows)} kernel(s): {sum(r['verdict'] == 'pass' for r in rows)} correct, {len(failed)} not, "
               f"{sum(r['verdict'] == 'skipped' for r in rows)} skipped (no {target.requested} target)")
    checked = [r for r in rows if r["verdict"] != "skipped"]
    nothing = "" if checked else nothing_checked(rows, target.requested)
    if nothing:  # a CI job that checks nothing must not be green forever
        click.echo(nothing)
    write_json({"repo": str(repo.resolve()), "kernels": rows, "notes": notes, "nothing_checked": nothing or None},
               json_path)
    return 1 if failed or nothing else 0


def nothing_checked(rows: list[dict[str, Any]], target: str) -> str:
    """The one line for a run in which every kernel was skipped: nothing checked, and why."""
    reasons = sorted({str(r.get("reason", "")) for r in rows})
    why = reasons[0] if len(reasons) == 1 else f"{reasons[0]} (and {len(reasons) - 1} other reason(s))"
    return (f"error: nothing was checked: all {len(rows)} kernel(s) were skipped on target {target} ({why}); "
            "run on a machine with their device, or pass --target")
