"""Policies: what the bot may do in a repository, read from YAML and validated on load.

A policy says which paths hold kernels, which targets must pass, how much faster a candidate must
be to earn a follow-up PR, the regression gate's threshold (per target kind) and confidence (with
per-path or per-kernel rules) and whether it must measure every required target, LLM budgets, whom
the PR bot trusts, which kernel languages candidates may use and whether they may fall back to
framework ops. Keys left out take the defaults below, which are
exactly `policies/default.yml` (a test keeps them equal). Any mistake is one `KforgeError` line
naming the file and the key path.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kforge_bot.config.choices import BASELINE_KINDS, ISOLATION_MODES
from kforge_bot.config.eval_settings import EvalSettings
from kforge_bot.config.policy_sections import (DEFAULT_THRESHOLDS, Budgets, Disturbance, Evaluation, Gate, GateRule,
                                               RuleSpec, ShapeSetSpec, Trust, WorkloadGate, asdict_shallow)
from kforge_bot.config.repo_paths import normalize_path, path_matches
from kforge_bot.config import reader
from kforge_bot.config.yamlcheck import Checker, join, load_yaml_text
from kforge_bot.errors import KforgeError
from kforge_bot.github.actions import Actions
from kforge_bot.kernelspec import LANGUAGE_ALIASES, TARGET_KINDS
from kforge_bot.kernelspec import KERNEL_LANGUAGES

# GitHub's author_association values (REST API: issues and pull requests).
ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR",
                "FIRST_TIMER", "MANNEQUIN", "NONE")
# Kernel languages a candidate may be written in.
# The manifest's kernel languages, plus those a policy may name ahead of the generator knowing them.
CANDIDATE_LANGUAGES = (*KERNEL_LANGUAGES, "cute-dsl", "metal")
TARGET_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


# What `check` and `optimize` evaluate with when no policy file is given: a quick look, seconds per evaluation (the
# default policy's 10 s of timing are the gate's and the PR bot's). Worker limits and isolation stay the policy's.
QUICK_EVALUATION = {"check": Evaluation(seeds=None, timing_budget_s=3.0), "optimize": Evaluation(seeds=2, timing_budget_s=2.0)}


@dataclass(frozen=True)
class Policy:
    kernel_paths: tuple[str, ...] = ("**",)
    required_targets: tuple[str, ...] = ()
    min_speedup: float = 1.05
    # The PR bot opens a follow-up PR only when every workload using the kernel (docs/workloads.md) is faster end to
    # end with the candidate: the whole interval of its paired ratio above 1.0.
    require_workload_gain: bool = False
    gate: Gate = field(default_factory=Gate)
    budgets: Budgets = field(default_factory=Budgets)
    trust: Trust = field(default_factory=Trust)
    languages: tuple[str, ...] = ("triton", "cuda", "cpp", "c", "sycl", "torch")
    allow_framework_fallback: bool = False
    evaluation: Evaluation = field(default_factory=Evaluation)
    isolation: str | None = None  # required | preferred | off; None: see isolation_mode
    # What speedups are reported against: eager (the kernel as written, always timed), and torch.compile of it
    # (compile, compile-max-autotune); with a compiled one, optimize accepts only what beats the faster of them all.
    baseline: tuple[str, ...] = ("eager",)
    source: str = field(default="<built-in defaults>", compare=False)

    def isolation_mode(self, command: str, environ: Mapping[str, str] | None = None) -> str:
        """How strictly `command` sandboxes user code: `required` for the gate and the PR bot inside GitHub Actions
        whatever the policy says (pull-request code on a runner that holds tokens), else the policy's
        `isolation`, else `preferred` (sandboxed where the machine can, said plainly where it cannot)."""
        env = os.environ if environ is None else environ
        if command in ("gate", "pr") and Actions.read(env).running:
            return "required"  # a floor no file can lower: the runner holds tokens and the checkout's credentials
        return self.isolation if self.isolation is not None else "preferred"

    def eval_settings(self, command: str, *, quick: bool = False, rule: GateRule | None = None,
                      **flags: Any) -> EvalSettings:
        """The settings `command` evaluates with: the policy's `evaluation` (seeds, timing budget, timeout, worker
        limits), its isolation for the command and its `allow_framework_fallback`; `quick`: QUICK_EVALUATION's
        seeds and timing instead (check and optimize without a policy file); `rule`: the judged kernel's gate rule
        (rule_for), which shape set counts as a regression, as every command judges it. `flags` are EvalSettings
        fields from the command line or the command itself; one that is None was not given: the policy's stays."""
        ev = QUICK_EVALUATION[command] if quick else self.evaluation
        settings: dict[str, Any] = {"seeds": ev.seeds, "timing_budget_s": ev.timing_budget_s, "timeout_s": ev.timeout_s,
                                    "isolation": self.isolation_mode(command),
                                    "allow_framework_fallback": self.allow_framework_fallback,
                                    "inconclusive": self.gate.inconclusive,
                                    **self.evaluation.limit_settings(), **(rule.shape_settings() if rule else {})}
        settings.update({key: value for key, value in flags.items() if value is not None})
        return EvalSettings(**settings)

    def rule_for(self, kernel_name: str, path: str, target: str | None = None) -> GateRule:
        """Gate settings for a kernel measured on `target` (a kind: cpu, cuda, xpu, mps): the first
        rule matching its name and/or path, with the gate's defaults for whatever that rule leaves
        out. Without a target the threshold is the strictest over all kinds (callers that only read
        `skip` need none)."""
        norm = normalize_path(path)
        for i, rule in enumerate(self.gate.rules):
            if rule.matches(kernel_name, norm):
                threshold, source = self._threshold(target, rule.threshold, f"gate.rules[{i}].threshold")
                shapes = {s.index: self._threshold(target, {**(rule.threshold or {}), **s.threshold}, "")[0]
                          for s in rule.shape_sets if s.threshold}
                return GateRule(
                    threshold=threshold,
                    confidence=self.gate.confidence if rule.confidence is None else rule.confidence,
                    skip=bool(rule.skip),
                    reason=rule.reason,
                    matched=f"gate.rules[{i}] ({rule.describe()})",
                    target=target,
                    threshold_from=source,
                    shape_thresholds=shapes,
                    informational_shapes=tuple(s.index for s in rule.shape_sets if s.informational),
                )
        threshold, source = self._threshold(target, None, "")
        return GateRule(threshold, self.gate.confidence, target=target, threshold_from=source)

    def _threshold(self, target: str | None, override: dict[str, float] | None, key: str) -> tuple[float, str]:
        if target is None:
            merged = {**self.gate.threshold, **(override or {})}
            return min(merged.values()), "the strictest of " + (key or "gate.threshold")
        if target not in TARGET_KINDS:
            raise KforgeError(f"no gate threshold for target {target!r}", hint=f"use one of {', '.join(TARGET_KINDS)}")
        if override and target in override:
            return override[target], f"{key}.{target}"
        return self.gate.threshold[target], f"gate.threshold.{target}"

    def is_kernel_path(self, path: str) -> bool:
        norm = normalize_path(path)
        return any(path_matches(p, norm) for p in self.kernel_paths)

    def allows_language(self, language: str) -> bool:
        return language in self.languages

    def trusts(self, association: str) -> bool:
        return association.upper() in self.trust.allowed_associations

    def to_dict(self) -> dict[str, Any]:
        """Plain data in the file's own layout (loading it back gives an equal Policy)."""
        d = asdict(self)
        d.pop("source")
        d["gate"]["rules"] = [{k: v for k, v in r.items() if v is not None and k != "shape_sets"}
                              for r in d["gate"]["rules"]]
        for written, rule in zip(d["gate"]["rules"], self.gate.rules):
            if rule.shape_sets:  # the file's layout: index -> what is set for that shape set
                written["shape_sets"] = {s.index: {k: v for k, v in asdict(s).items()
                                                   if k != "index" and v not in (None, False)}
                                         for s in rule.shape_sets}
        if d["gate"]["workloads"]["precision"] is None:  # unset: a quarter of the threshold (precision_for)
            del d["gate"]["workloads"]["precision"]
        if d["budgets"]["patience"] is None:  # unset: the proposer's own, which a file says by leaving it out
            del d["budgets"]["patience"]
        return _lists(d)


def _lists(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _lists(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_lists(v) for v in x]
    return x


# ---------------------------------------------------------------------------------------------
# Loading and validation

_TOP = ("version", "kernel_paths", "required_targets", "min_speedup", "require_workload_gain", "gate", "budgets", "trust",
        "languages", "allow_framework_fallback", "evaluation", "isolation", "baseline")
_RULE_KEYS = ("path", "kernel", "threshold", "confidence", "skip", "reason", "shape_sets")
_SHAPE_SET_KEYS = ("threshold", "informational", "reason")


def _glob(ck: Checker, value: Any, key: str) -> str:
    g = ck.string(value, key)
    if g.startswith("/") or ".." in PurePosixPath(g).parts:
        ck.fail(key, f"expected a repository-relative glob, got {g!r}", hint="drop the leading '/' and any '..'")
    return g


def _threshold(ck: Checker, value: Any, key: str) -> dict[str, float]:
    """A number (every target kind) or a mapping of target kinds to numbers (the kinds it names)."""
    if isinstance(value, dict):
        ck.mapping(value, key, allowed=TARGET_KINDS)
        if not value:
            ck.fail(key, "expected a number between 0 and 1 or a mapping of target kinds to numbers, got {}",
                    hint=f"e.g. {{cpu: 0.05, cuda: 0.02}} (kinds: {', '.join(TARGET_KINDS)})")
        return {k: ck.number(v, join(key, k), minimum=0, maximum=1) for k, v in value.items()}
    number = ck.number(value, key, minimum=0, maximum=1)
    return {k: number for k in TARGET_KINDS}


def _confidence(ck: Checker, value: Any, key: str) -> float:
    c = ck.number(value, key, minimum=0.5, maximum=1)
    if c >= 1:
        ck.fail(key, "expected a number between 0.5 and 1 (exclusive of 1), got 1", hint="use e.g. 0.95 or 0.99")
    return c


def parse_policy(raw: Any, path: str | Path) -> Policy:
    """A Policy from a file's parsed YAML: the top-level keys here, each section in its own parser."""
    ck = Checker(path)
    if raw is None:
        raw = {}
    top = ck.mapping(raw, "", allowed=_TOP)
    if "version" in top and (top["version"] != 1 or isinstance(top["version"], bool)):
        ck.expected("version", "1", top["version"])
    base = Policy()
    kw: dict[str, Any] = {}

    if "kernel_paths" in top:
        v = top["kernel_paths"]
        if not isinstance(v, list) or not v:
            ck.expected("kernel_paths", "a non-empty list of globs", v)
        kw["kernel_paths"] = tuple(_glob(ck, g, join("kernel_paths", i)) for i, g in enumerate(v))
    if "required_targets" in top:
        targets = ck.string_list(top["required_targets"], "required_targets")
        for i, name in enumerate(targets):
            if not TARGET_NAME_RE.match(name):
                ck.fail(join("required_targets", i),
                        f"expected a target kind ({', '.join(TARGET_KINDS)}) or a runner name like 'h200', got {name!r}")
        kw["required_targets"] = tuple(targets)
    if "min_speedup" in top:
        kw["min_speedup"] = ck.number(top["min_speedup"], "min_speedup", minimum=1)
    if "languages" in top:
        named = [LANGUAGE_ALIASES.get(x, x) for x in ck.string_list(top["languages"], "languages", nonempty=True)]
        kw["languages"] = tuple(ck.string(x, join("languages", i), CANDIDATE_LANGUAGES) for i, x in enumerate(named))
    if "baseline" in top:
        kinds = ck.string_list(top["baseline"], "baseline", choices=BASELINE_KINDS, nonempty=True)
        kw["baseline"] = tuple(dict.fromkeys(["eager", *kinds]))  # eager is what every run is timed against
    if "require_workload_gain" in top:
        kw["require_workload_gain"] = ck.boolean(top["require_workload_gain"], "require_workload_gain")
    if "allow_framework_fallback" in top:
        kw["allow_framework_fallback"] = ck.boolean(top["allow_framework_fallback"], "allow_framework_fallback")
    if top.get("isolation") is not None:  # null: unset, as to_dict writes it
        kw["isolation"] = ck.string(top["isolation"], "isolation")
        if kw["isolation"] not in ISOLATION_MODES:
            ck.fail("isolation", f"expected one of {', '.join(ISOLATION_MODES)}, got {kw['isolation']!r}",
                    hint="required: refuse to run user code unsandboxed; preferred: sandbox where possible")

    sections = {"gate": _parse_gate, "budgets": _parse_budgets, "trust": _parse_trust, "evaluation": _parse_evaluation}
    for key, parse in sections.items():
        if key in top:
            kw[key] = parse(ck, top[key], getattr(base, key))
    return Policy(**kw, source=str(path))


def _parse_gate(ck: Checker, raw: Any, base: Gate) -> Gate:
    g = ck.mapping(raw, "gate", allowed=("threshold", "confidence", "rules", "require_all_targets", "all_skipped",
                                         "inconclusive", "workloads"))
    gkw: dict[str, Any] = {}
    if "workloads" in g:
        gkw["workloads"] = _parse_workload_gate(ck, g["workloads"])
    if "threshold" in g:
        # A mapping sets the kinds it names; the others keep their defaults (DEFAULT_THRESHOLDS).
        gkw["threshold"] = {**DEFAULT_THRESHOLDS, **_threshold(ck, g["threshold"], "gate.threshold")}
    if "require_all_targets" in g:
        gkw["require_all_targets"] = ck.boolean(g["require_all_targets"], "gate.require_all_targets")
    if "all_skipped" in g:
        gkw["all_skipped"] = ck.string(g["all_skipped"], "gate.all_skipped")
        if gkw["all_skipped"] not in ("fail", "pass"):
            ck.fail("gate.all_skipped", f"expected fail or pass, got {gkw['all_skipped']!r}",
                    hint="fail: a gate run that measured no changed kernel fails; pass: it passes")
    if "inconclusive" in g:
        gkw["inconclusive"] = ck.string(g["inconclusive"], "gate.inconclusive")
        if gkw["inconclusive"] not in ("fail", "pass"):
            ck.fail("gate.inconclusive", f"expected fail or pass, got {gkw['inconclusive']!r}",
                    hint="fail: a timing that decided nothing fails the gate; pass: it passes (never cached)")
    if "confidence" in g:
        gkw["confidence"] = _confidence(ck, g["confidence"], "gate.confidence")
    if "rules" in g:
        rules_raw = g["rules"]
        if not isinstance(rules_raw, list):
            ck.expected("gate.rules", "a list of rules", rules_raw)
        rules = []
        for i, r in enumerate(rules_raw):
            key = f"gate.rules[{i}]"
            rm = ck.mapping(r, key, allowed=_RULE_KEYS)
            if "path" not in rm and "kernel" not in rm:
                ck.fail(key, "a rule needs `path` (a glob) or `kernel` (a name pattern) to say what it applies to")
            if not any(k in rm for k in ("threshold", "confidence", "skip", "shape_sets")):
                ck.fail(key, "a rule must set at least one of threshold, confidence, skip, shape_sets")
            rules.append(RuleSpec(
                path=_glob(ck, rm["path"], f"{key}.path") if "path" in rm else None,
                kernel=ck.string(rm["kernel"], f"{key}.kernel") if "kernel" in rm else None,
                threshold=_threshold(ck, rm["threshold"], f"{key}.threshold") if "threshold" in rm else None,
                confidence=_confidence(ck, rm["confidence"], f"{key}.confidence") if "confidence" in rm else None,
                skip=ck.boolean(rm["skip"], f"{key}.skip") if "skip" in rm else None,
                reason=ck.string(rm["reason"], f"{key}.reason") if "reason" in rm else None,
                shape_sets=_shape_sets(ck, rm["shape_sets"], f"{key}.shape_sets") if "shape_sets" in rm else (),
            ))
        gkw["rules"] = tuple(rules)
    return Gate(**{**asdict_shallow(base), **gkw})


def _parse_workload_gate(ck: Checker, raw: Any) -> WorkloadGate:
    w = ck.mapping(raw, "gate.workloads",
                   allowed=("threshold", "precision", "min_pairs", "max_pairs", "budget_s", "sample_s", "processes"))
    kw: dict[str, Any] = {}
    if "threshold" in w:
        kw["threshold"] = {**DEFAULT_THRESHOLDS, **_threshold(ck, w["threshold"], "gate.workloads.threshold")}
    if "precision" in w:
        kw["precision"] = ck.number(w["precision"], "gate.workloads.precision", minimum=0, maximum=1,
                                    exclusive_minimum=True)
    if "min_pairs" in w:
        kw["min_pairs"] = ck.integer(w["min_pairs"], "gate.workloads.min_pairs", minimum=2, maximum=1000)
    if "max_pairs" in w:
        kw["max_pairs"] = ck.integer(w["max_pairs"], "gate.workloads.max_pairs", minimum=2, maximum=1000)
    if "budget_s" in w:
        kw["budget_s"] = ck.number(w["budget_s"], "gate.workloads.budget_s", minimum=0, exclusive_minimum=True)
    if "sample_s" in w:
        kw["sample_s"] = ck.number(w["sample_s"], "gate.workloads.sample_s", minimum=0, exclusive_minimum=True,
                                   maximum=60)
    if "processes" in w:
        kw["processes"] = ck.integer(w["processes"], "gate.workloads.processes", minimum=1, maximum=16)
    made = WorkloadGate(**kw)
    if made.max_pairs < made.min_pairs:
        ck.fail("gate.workloads.max_pairs", f"{made.max_pairs} is below min_pairs ({made.min_pairs})")
    return made


def _shape_sets(ck: Checker, raw: Any, key: str) -> tuple[ShapeSetSpec, ...]:
    """`{1: {informational: true}, 2: {threshold: 0.10}}`: shape sets by their index in the kernel's `shapes`."""
    if not isinstance(raw, dict) or not raw:
        ck.expected(key, "a mapping of shape set indices (0, 1, ...) to {threshold, informational, reason}", raw)
    out = []
    for index, value in raw.items():
        if isinstance(index, bool) or not (isinstance(index, int) or (isinstance(index, str) and index.isdigit())):
            ck.fail(join(key, str(index)), f"expected a shape set's index (0, 1, ...), got {index!r}",
                    hint="shape sets are numbered from 0 in the order the kernel's `shapes` lists them")
        where = join(key, str(index))
        entry = ck.mapping(value, where, allowed=_SHAPE_SET_KEYS)
        if "threshold" not in entry and not entry.get("informational"):
            ck.fail(where, "a shape set entry sets a threshold or informational: true")
        out.append(ShapeSetSpec(
            index=int(index),
            threshold=_threshold(ck, entry["threshold"], join(where, "threshold")) if "threshold" in entry else None,
            informational=ck.boolean(entry["informational"], join(where, "informational"))
            if "informational" in entry else False,
            reason=ck.string(entry["reason"], join(where, "reason")) if "reason" in entry else None))
    return tuple(sorted(out, key=lambda s: s.index))


def _parse_budgets(ck: Checker, raw: Any, base: Budgets) -> Budgets:
    b = ck.mapping(raw, "budgets", allowed=("iterations", "tokens", "time_limit_s", "speed_of_light", "patience"))
    bkw: dict[str, Any] = {}
    if "iterations" in b:
        bkw["iterations"] = ck.integer(b["iterations"], "budgets.iterations", minimum=1)
    if "tokens" in b:
        bkw["tokens"] = ck.integer(b["tokens"], "budgets.tokens", minimum=1)
    if "time_limit_s" in b:
        bkw["time_limit_s"] = ck.number(b["time_limit_s"], "budgets.time_limit_s", minimum=0, exclusive_minimum=True)
    if "speed_of_light" in b:
        bkw["speed_of_light"] = ck.number(b["speed_of_light"], "budgets.speed_of_light", minimum=0,
                                          exclusive_minimum=True, maximum=1)
    if "patience" in b:
        bkw["patience"] = ck.integer(b["patience"], "budgets.patience", minimum=1)
    return Budgets(**{**asdict_shallow(base), **bkw})


def _parse_trust(ck: Checker, raw: Any, base: Trust) -> Trust:
    t = ck.mapping(raw, "trust", allowed=("allowed_associations", "trigger_label", "allow_forks", "spec_change_label"))
    tkw: dict[str, Any] = {}
    if "allowed_associations" in t:
        tkw["allowed_associations"] = tuple(
            ck.string_list(t["allowed_associations"], "trust.allowed_associations", choices=ASSOCIATIONS))
    for key in ("trigger_label", "spec_change_label"):
        if key in t:
            label = ck.string(t[key], f"trust.{key}")
            if len(label) > 50:
                ck.fail(f"trust.{key}", "GitHub labels are at most 50 characters")
            tkw[key] = label
    if "allow_forks" in t:
        tkw["allow_forks"] = ck.boolean(t["allow_forks"], "trust.allow_forks")
    return Trust(**{**asdict_shallow(base), **tkw})


def _parse_evaluation(ck: Checker, raw: Any, base: Evaluation) -> Evaluation:
    e = ck.mapping(raw, "evaluation", allowed=("seeds", "timing_budget_s", OLD_TIMING_BUDGET_KEY, "timeout_s",
                                               "memory_limit_gb", "process_limit", "cpu_limit_s", "scratch_limit_gb",
                                               "cpu_threads", "disturbance"))
    ekw: dict[str, Any] = {}
    if "seeds" in e:
        ekw["seeds"] = ck.integer(e["seeds"], "evaluation.seeds", minimum=1, maximum=100)
    budget_key = OLD_TIMING_BUDGET_KEY if OLD_TIMING_BUDGET_KEY in e else "timing_budget_s"
    if budget_key == OLD_TIMING_BUDGET_KEY:
        if "timing_budget_s" in e:
            ck.fail(f"evaluation.{OLD_TIMING_BUDGET_KEY}", "is the earlier name of evaluation.timing_budget_s",
                    hint=f"keep timing_budget_s and drop {OLD_TIMING_BUDGET_KEY}")
        _note_once(f"{ck.path}: note: evaluation.{OLD_TIMING_BUDGET_KEY} is deprecated; call it "
                   "evaluation.timing_budget_s (the same seconds of timing in one evaluation)")
    if budget_key in e:
        ekw["timing_budget_s"] = ck.number(e[budget_key], f"evaluation.{budget_key}", minimum=0, exclusive_minimum=True)
    if "timeout_s" in e:
        ekw["timeout_s"] = ck.number(e["timeout_s"], "evaluation.timeout_s", minimum=0, exclusive_minimum=True)
    for key in ("memory_limit_gb", "cpu_limit_s", "scratch_limit_gb"):  # null: the default (evaluate.wire.limits)
        if e.get(key) is not None:
            ekw[key] = ck.number(e[key], f"evaluation.{key}", minimum=0, exclusive_minimum=True)
    if e.get("process_limit") is not None:
        ekw["process_limit"] = ck.integer(e["process_limit"], "evaluation.process_limit", minimum=16)
    if e.get("cpu_threads") is not None:
        ekw["cpu_threads"] = ck.integer(e["cpu_threads"], "evaluation.cpu_threads", minimum=1, maximum=4096)
    if e.get("disturbance") is not None:
        d = ck.mapping(e["disturbance"], "evaluation.disturbance",
                       allowed=("preempted_share", "preempted_gap", "crowded_share", "wait_share"))
        ekw["disturbance"] = Disturbance(**{k: None if v is None else ck.number(v, f"evaluation.disturbance.{k}",
                                                                                  minimum=0, maximum=1)
                                            for k, v in d.items()})
    ev = Evaluation(**{**asdict_shallow(base), **ekw})
    if ev.timeout_s < ev.timing_budget_s:
        ck.fail("evaluation.timeout_s", f"must be at least evaluation.timing_budget_s ({ev.timing_budget_s:g}), got {ev.timeout_s:g}")
    return ev


# evaluation.timing_budget_s's earlier name (before "budget" was kept for a whole run's): still read, with a note.
OLD_TIMING_BUDGET_KEY = "time_budget_s"
_noted: set[str] = set()


def _note_once(text: str) -> None:
    """A deprecation note on stderr, once per process however many times the policy is loaded."""
    if text not in _noted:
        _noted.add(text)
        print(text, file=sys.stderr)



def policies_dir() -> Path:
    """The shipped policies (package data; `policies/*.yml` in the repository link here)."""
    return Path(__file__).resolve().parents[1] / "data" / "policies"


def shipped_policies() -> dict[str, Path]:
    return {p.stem: p for p in sorted(policies_dir().glob("*.yml"))}


def load_policy(path: str | Path | None = None) -> Policy:
    """Load and validate a policy file. None gives the shipped default policy; a bare name
    such as "strict" that is not an existing file gives the shipped policy of that name."""
    if path is None:
        path = policies_dir() / "default.yml"
    p = Path(path)
    if not p.exists() and p.suffix == "" and str(path) in shipped_policies():
        p = shipped_policies()[str(path)]
    if not p.exists():
        raise KforgeError("policy file not found", path=p,
                          hint="pass a YAML file, or one of the shipped policies: " + ", ".join(shipped_policies()))
    return parse_policy(reader.read_yaml(p), p)


def load_policy_from_base(repo: str | Path, rev: str, path: str | Path | None) -> Policy:
    """The policy as the trusted commit `rev` (the base) has it. A policy file inside the checkout `repo` is read
    from `rev` with git, never from the working tree, which holds the pull request being judged: a pull request
    cannot bring its own thresholds, trust or isolation. A file outside the checkout (the runner's own) and the
    shipped policies are read as they are."""
    from kforge_bot import gitops  # not at the top: `check` and the workers never read a policy through git

    if path is None:
        return load_policy(None)
    top = Path(repo).resolve()
    given = Path(os.path.abspath(path))  # not resolved: a symbolic link in the working tree is the head's
    rel: str | None = None
    for candidate in (given, given.parent.resolve() / given.name):
        if candidate.is_relative_to(top):
            rel = candidate.relative_to(top).as_posix()
            break
    if rel is None:
        return load_policy(path)
    text = gitops.read_file_at(top, rev, rel)
    if text is None:
        if "/" not in rel and Path(rel).suffix == "" and rel in shipped_policies():  # `strict`, named as the action does
            return load_policy(rel)
        raise KforgeError(f"policy file {rel} is not in the base commit {rev[:12]}", path=top,
                          hint="commit the policy to the base branch first: a pull request cannot bring its own")
    label = f"{rel} (base {rev[:12]})"
    return parse_policy(load_yaml_text(text, label), label)
