"""`kforge-bot check` run: the policy's settings with the flags over them, the target chosen once per kernel, one
evaluation (and the compiled baselines asked for), or with --all every managed kernel, a line each."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from kforge_bot.check.render import nothing_checked, render
from kforge_bot.config.policy import Policy, load_policy
from kforge_bot.errors import KforgeError
from kforge_bot.evaluate.api import evaluate
from kforge_bot.evaluate.baselines import against_baselines, measure_compiled, requested_compiled
from kforge_bot.evaluate.isolation import announcement
from kforge_bot.evaluate.session import EvaluationSession
from kforge_bot.evaluate.wire.result import EvalResult, EvalSettings
from kforge_bot.kernelspec import Implementation, KernelSpec, load_spec
from kforge_bot.kernelspec.comparison import resolve_candidate
from kforge_bot.kernelspec.kernels import discover
from kforge_bot.targets import TargetChoice, choose_target

SaveJson = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class CheckRequest:
    """What `kforge-bot check` was asked: which kernel (or all of a repository's), where, and the flags that
    override the policy's evaluation settings (None: the policy's)."""

    reference: Path | None
    all_kernels: bool
    policy_path: str | None
    candidate_path: Path | None
    kernel: str | None
    target: str
    seeds: int | None
    timing_budget_s: float | None
    timeout_s: float | None
    measure: bool
    allow_fallback: bool
    isolation: str | None
    baselines: tuple[str, ...]


def run_check(request: CheckRequest, *, quiet: bool, console: Console, save_json: SaveJson) -> int:
    """Check one kernel, or with `all_kernels` every one a repository manages; returns the exit code (0 correct,
    1 not). `quiet`: the JSON report goes to stdout (`save_json` writes it there), so no table and no live line."""
    policy = load_policy(request.policy_path)
    chosen = choose_target(request.target)
    flags = {"quick": request.policy_path is None, "seeds": request.seeds, "timing_budget_s": request.timing_budget_s,
             "timeout_s": request.timeout_s, "measure": request.measure, "isolation": request.isolation,
             "allow_framework_fallback": request.allow_fallback or None}

    def settings_for(spec: KernelSpec, kind: str) -> EvalSettings:
        """The policy's settings and its rule for the kernel on `kind`, the flags over them."""
        return policy.eval_settings("check", rule=policy.rule_for(spec.name, spec.kernel_file, kind), **flags)

    isolation = policy.eval_settings("check", **flags).isolation
    if request.all_kernels:
        if request.candidate_path is not None or request.kernel is not None:
            raise KforgeError("--all checks each kernel as written against its reference",
                              hint="drop --candidate and --kernel, or check one kernel without --all")
        return _check_all(request.reference or Path("."), policy, chosen, settings_for, isolation, save_json)
    if request.reference is None:
        raise KforgeError("which kernel? give a kernel file, a kforge.yaml or a KernelBench problem",
                          hint="kforge-bot check FILE, or kforge-bot check --all [REPO] for every managed kernel")
    spec = load_spec(request.reference, request.kernel)
    candidate, baseline, title = resolve_candidate(spec, request.candidate_path)
    kind = chosen.device_kind(spec.targets)
    target = _chosen_for(chosen, kind)
    settings = settings_for(spec, kind)
    click.echo(announcement(isolation), err=True)
    kinds = requested_compiled(request.baselines or policy.baseline)
    # One session for the candidate and the compiled baselines: one reference run serves both.
    with EvaluationSession(target, settings.seed_count(spec.seeds)) as session, \
            _Progress(enabled=sys.stderr.isatty() and not quiet) as progress:
        result = session.evaluate(spec, candidate, settings, baseline=baseline, progress=progress)
        if kinds:
            attach_baselines(result, spec, baseline, kinds, session, settings, progress=progress)
    save_json({"kernel": spec.name, "format": spec.format, "comparison": title, **result.to_dict()})
    if not quiet:
        render(result, f"kforge-bot check: {title}", console)
    return 0 if result.correct else 1


def _chosen_for(chosen: TargetChoice, kind: str) -> TargetChoice:
    """The target as chosen for one kernel, its device kind settled: evaluate takes it as it is (no second
    reading of the name, no second look for the device)."""
    return TargetChoice(chosen.requested, kind, chosen.runner)


def attach_baselines(result: EvalResult, spec: KernelSpec, eager: Implementation, kinds: tuple[str, ...],
                     session: EvaluationSession, settings: EvalSettings, **kwargs: Any) -> None:
    """The compiled baselines measured (only for a correct, timed candidate: there is nothing to compare otherwise)
    and the candidate's speedups against each, in `details.baselines`."""
    if not (result.correct and result.details.get("timing")):
        result.details["baselines"] = {"note": f"{', '.join(kinds)} not measured: the candidate is "
                                               f"{result.verdict} (or untimed)"}
        return
    compiled = measure_compiled(spec, eager, kinds, session.evaluate, settings, **kwargs)
    result.details["baselines"] = against_baselines(result, compiled)


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


def _check_all(repo: Path, policy: Policy, target: TargetChoice,
               settings_for: Callable[[KernelSpec, str], EvalSettings], isolation: str, save_json: SaveJson) -> int:
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
                    result = evaluate(spec, candidate, _chosen_for(target, kind), settings_for(spec, kind),
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
    save_json({"repo": str(repo.resolve()), "kernels": rows, "notes": notes, "nothing_checked": nothing or None})
    return 1 if failed or nothing else 0
