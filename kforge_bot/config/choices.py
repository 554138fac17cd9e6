"""The words a policy accepts for what the harness does, kept here so the policy, its schema and the flags read
them without importing the harness (which acts on them: evaluate/isolation.py, evaluate/baselines.py)."""

from __future__ import annotations

ISOLATION_MODES = ("required", "preferred", "off")  # the sandbox: required, used where it works, or none
EAGER = "eager"
BASELINE_KINDS = (EAGER, "compile", "compile-max-autotune")  # what a kernel is timed against
