"""The JSON Schema of a policy file (draft 2020-12), for editors and check-jsonschema.

policies/schema.json is generated from this (`kforge-bot policy schema`; a test keeps them equal). The loader
(kforge_bot.config.policy) is the authority; this mirrors it, and a test checks both agree on examples."""

from __future__ import annotations

import copy
from typing import Any

from kforge_bot.config.choices import BASELINE_KINDS, ISOLATION_MODES
from kforge_bot.config.policy import ASSOCIATIONS, CANDIDATE_LANGUAGES, TARGET_NAME_RE, Policy
from kforge_bot.kernelspec import LANGUAGE_ALIASES, TARGET_KINDS


# Pieces used in several places of the schema.
_POS = {"type": "number", "exclusiveMinimum": 0}
_OPTIONAL_POS = {"type": ["number", "null"], "exclusiveMinimum": 0}  # null: the default
_GLOB = {"type": "string", "minLength": 1, "not": {"pattern": r"^/|(^|/)\.\.(/|$)"}}
_NUMBER01 = {"type": "number", "minimum": 0, "maximum": 1}
_THRESHOLD = {"oneOf": [_NUMBER01, {"type": "object", "additionalProperties": False, "minProperties": 1,
                                    "properties": {k: _NUMBER01 for k in TARGET_KINDS}}]}
_CONFIDENCE = {"type": "number", "minimum": 0.5, "exclusiveMaximum": 1}


def json_schema() -> dict[str, Any]:
    """The schema, with the defaults of `Policy()`: the top level here, each section of a policy file in a
    function of its own, in the file's order. A fresh copy each call (the pieces above are shared)."""
    d = Policy()
    return copy.deepcopy({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kforge-bot policy",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "version": {"const": 1},
            "kernel_paths": {"type": "array", "minItems": 1, "items": _GLOB, "default": list(d.kernel_paths),
                             "description": "Globs of repository paths that may hold kernels."},
            "required_targets": {"type": "array", "items": {"type": "string", "pattern": TARGET_NAME_RE.pattern},
                                 "default": list(d.required_targets),
                                 "description": "Target kinds or runner names on which a candidate must be correct "
                                                "and measured; empty means every target that ran."},
            "min_speedup": {"type": "number", "minimum": 1, "default": d.min_speedup,
                            "description": "Smallest speedup (lower end of its interval) worth a follow-up PR."},
            "require_workload_gain": {"type": "boolean", "default": d.require_workload_gain,
                                      "description": "Open a follow-up PR only when every workload that uses the "
                                                     "kernel is faster end to end (docs/workloads.md)."},
            "gate": _gate(d),
            "budgets": _budgets(d),
            "trust": _trust(d),
            "languages": {"type": "array", "minItems": 1, "items": {"enum": [*CANDIDATE_LANGUAGES, *LANGUAGE_ALIASES]},
                          "default": list(d.languages)},
            "allow_framework_fallback": {"type": "boolean", "default": d.allow_framework_fallback},
            "baseline": {"type": "array", "minItems": 1, "items": {"enum": list(BASELINE_KINDS)},
                         "default": list(d.baseline),
                         "description": "What speedups are reported against: eager (the kernel as written), and "
                                        "the same code under torch.compile (compile; compile-max-autotune); with a "
                                        "compiled one, optimize accepts only what beats the faster of them all."},
            "isolation": {"enum": list(ISOLATION_MODES),
                          "description": "the OS sandbox for user code; gate and pr in GitHub Actions: always "
                                         "required; elsewhere unset means preferred"},
            "evaluation": _evaluation(d),
        },
    })


def _gate(d: Policy) -> dict[str, Any]:
    """The `gate:` section: thresholds, what a skipped or undecided run means, workloads and per-kernel rules."""
    return {
        "type": "object", "additionalProperties": False,
        "properties": {
            "threshold": {**_THRESHOLD, "default": dict(d.gate.threshold),
                          "description": "Relative slowdown that counts as a regression: one number for "
                                         "every target kind, or per kind (kinds left out keep their "
                                         "defaults)."},
            "confidence": {**_CONFIDENCE, "default": d.gate.confidence},
            "require_all_targets": {"type": "boolean", "default": d.gate.require_all_targets,
                                    "description": "Fail when a required target cannot be measured "
                                                   "on this runner, instead of reporting it skipped."},
            "all_skipped": {"enum": ["fail", "pass"], "default": d.gate.all_skipped,
                            "description": "A run in which every changed kernel was skipped (none "
                                           "measured here) fails, or passes."},
            "inconclusive": {"enum": ["fail", "pass"], "default": d.gate.inconclusive,
                             "description": "A timing that decided nothing (disturbed twice, or straddling "
                                            "the threshold after its confirmation run) fails, or passes "
                                            "(never cached)."},
            "workloads": _gate_workloads(d),
            "rules": {"type": "array", "items": _gate_rule()},
        }}


def _gate_workloads(d: Policy) -> dict[str, Any]:
    """`gate.workloads:` how the gate judges a manifest's workloads."""
    return {
        "type": "object", "additionalProperties": False,
        "description": "How the gate judges a manifest's workloads (docs/workloads.md).",
        "properties": {
            "threshold": {**_THRESHOLD, "default": dict(d.gate.workloads.threshold),
                          "description": "Relative end-to-end slowdown that fails a workload."},
            "precision": {"type": "number", "exclusiveMinimum": 0, "maximum": 1,
                          "description": "Half-width of the paired ratio's interval to measure to; "
                                         "unset: a quarter of the threshold, 0.1% to 0.5%."},
            "min_pairs": {"type": "integer", "minimum": 2, "maximum": 1000,
                          "default": d.gate.workloads.min_pairs},
            "max_pairs": {"type": "integer", "minimum": 2, "maximum": 1000,
                          "default": d.gate.workloads.max_pairs},
            "budget_s": {**_POS, "default": d.gate.workloads.budget_s,
                         "description": "Seconds per workload: both processes' start and "
                                        "warm-up, and the sample pairs."},
            "sample_s": {**_POS, "maximum": 60, "default": d.gate.workloads.sample_s,
                         "description": "Seconds one sample's calls run at least (the same count "
                                        "of calls on both sides)."},
        }}


def _gate_rule() -> dict[str, Any]:
    """One of `gate.rules:`: a path or kernel, and its own threshold, confidence, skip or shape sets."""
    return {
        "type": "object", "additionalProperties": False,
        "anyOf": [{"required": ["path"]}, {"required": ["kernel"]}],
        "allOf": [{"anyOf": [{"required": ["threshold"]}, {"required": ["confidence"]},
                             {"required": ["skip"]}, {"required": ["shape_sets"]}]}],
        "properties": {
            "path": _GLOB, "kernel": {"type": "string", "minLength": 1},
            "threshold": _THRESHOLD, "confidence": _CONFIDENCE,
            "skip": {"type": "boolean"}, "reason": {"type": "string", "minLength": 1},
            "shape_sets": {
                "type": "object", "minProperties": 1, "propertyNames": {"pattern": "^[0-9]+$"},
                "description": "Per shape set (its index in the kernel's shapes, from 0): its own "
                               "threshold, or informational (reported, never a regression).",
                "additionalProperties": {
                    "type": "object", "additionalProperties": False,
                    "anyOf": [{"required": ["threshold"]},
                              {"required": ["informational"],
                               "properties": {"informational": {"const": True}}}],
                    "properties": {"threshold": _THRESHOLD, "informational": {"type": "boolean"},
                                   "reason": {"type": "string", "minLength": 1}}}},
        }}


def _budgets(d: Policy) -> dict[str, Any]:
    """The `budgets:` section: how long an optimize run may go on."""
    return {
        "type": "object", "additionalProperties": False,
        "properties": {
            "iterations": {"type": "integer", "minimum": 1, "default": d.budgets.iterations},
            "tokens": {"type": "integer", "minimum": 1, "default": d.budgets.tokens},
            "time_limit_s": {**_POS, "default": d.budgets.time_limit_s},
            "speed_of_light": {"type": "number", "exclusiveMinimum": 0, "maximum": 1,
                               "default": d.budgets.speed_of_light},
            "patience": {"type": "integer", "minimum": 1,
                         "description": "candidates in a row without a new best before the run stops "
                                        "(default: 6 for the tuner, 4 for an LLM)"},
        }}


def _trust(d: Policy) -> dict[str, Any]:
    """The `trust:` section: whose pull requests the bot acts on."""
    return {
        "type": "object", "additionalProperties": False,
        "properties": {
            "allowed_associations": {"type": "array", "items": {"enum": list(ASSOCIATIONS)},
                                     "default": list(d.trust.allowed_associations)},
            "trigger_label": {"type": "string", "minLength": 1, "maxLength": 50, "default": d.trust.trigger_label},
            "allow_forks": {"type": "boolean", "default": d.trust.allow_forks},
            "spec_change_label": {"type": "string", "minLength": 1, "maxLength": 50,
                                  "default": d.trust.spec_change_label},
        }}


def _evaluation(d: Policy) -> dict[str, Any]:
    """The `evaluation:` section: seeds, timing, a worker's limits, and how disturbed a timing may be."""
    return {
        "type": "object", "additionalProperties": False,
        "properties": {
            "seeds": {"type": "integer", "minimum": 1, "maximum": 100, "default": d.evaluation.seeds},
            "timing_budget_s": {**_POS, "default": d.evaluation.timing_budget_s,
                                "description": "seconds of interleaved timing in one evaluation"},
            "time_budget_s": {**_POS, "deprecated": True, "description": "the earlier name of timing_budget_s"},
            "timeout_s": {**_POS, "default": d.evaluation.timeout_s,
                          "description": "seconds before one evaluation's worker is killed, compilation "
                                         "included"},
            "memory_limit_gb": {**_OPTIONAL_POS, "description": "each worker process's address space "
                                "(RLIMIT_AS); unset: half the machine's on cpu and mps, none on GPUs"},
            "process_limit": {"type": ["integer", "null"], "minimum": 16,
                              "description": "processes and threads in one sandbox; unset: 4096"},
            "cpu_limit_s": {**_OPTIONAL_POS, "description": "CPU seconds per worker process; unset: "
                                                            "timeout_s x cores"},
            "scratch_limit_gb": {**_OPTIONAL_POS, "description": "a worker's scratch folder, any one file, "
                                 "each private tmpfs; unset: half the scratch file system, at most 64"},
            "cpu_threads": {"type": ["integer", "null"], "minimum": 1, "maximum": 4096,
                            "description": "torch's and OpenMP's threads in every worker (runners that "
                                           "share cores); unset: the framework's default"},
            "disturbance": _disturbance(),
        }}


def _disturbance() -> dict[str, Any]:
    """`evaluation.disturbance:` the shares of disturbed samples a timing may have and still count."""
    return {
        "type": "object", "additionalProperties": False,
        "description": "how disturbed a timing may be and still count (else inconclusive): shares "
                       "of the timed samples; 1 switches a rule off",
        "properties": {key: {"type": ["number", "null"], "minimum": 0, "maximum": 1,
                             "description": text} for key, text in (
            ("preempted_share", "a side's samples with an involuntary context switch (default 0.75)"),
            ("preempted_gap", "... more on one side than the other (default 0.3)"),
            ("crowded_share", "samples with more runnable tasks than cores (default 0.5)"),
            ("wait_share", "a side's runnable time spent waiting for a core, CPU targets (default 0.15)"))}}
