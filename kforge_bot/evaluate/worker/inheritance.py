"""Whether a candidate's forward is the baseline's, inherited rather than written: the inherits-forward rule of the
candidate's worker (evaluate.worker.candidate_role), against the baseline itself or, where the head's worker holds
no base code (shipped inputs), against the fingerprint the reference's worker recorded."""

from __future__ import annotations

from typing import Any

import torch

from kforge_bot.evaluate.worker.shipped_inputs import forward_fingerprint


def inherits_recorded(candidate: Any, fingerprint: str | None) -> bool:
    """inherits_forward against the reference's forward as its worker recorded it (shipped: no baseline here)."""
    if fingerprint is None or not isinstance(candidate, torch.nn.Module):
        return False
    owner = inherited_forward_owner(candidate)
    return owner is not None and forward_fingerprint(owner) == fingerprint


def inherited_forward_owner(candidate: torch.nn.Module) -> type | None:
    """The class the candidate's forward comes from, where another module than the candidate's defines it."""
    owner = next((k for k in type(candidate).__mro__ if "forward" in vars(k)), None)
    if owner is None or owner.__module__ == type(candidate).__module__:
        return None  # defined by the candidate's own module: its own work
    return owner


def inherits_forward(candidate: Any, baseline: Any) -> bool:
    """The candidate's forward is the baseline's, inherited (even from another import of the same file)."""
    if not isinstance(candidate, torch.nn.Module) or not isinstance(baseline, torch.nn.Module) \
            or type(candidate) is type(baseline):
        return False
    mine = getattr(type(candidate), "forward", None)
    theirs = getattr(type(baseline), "forward", None)
    if mine is theirs:
        return True
    if inherited_forward_owner(candidate) is None:
        return False
    a, b = getattr(mine, "__code__", None), getattr(theirs, "__code__", None)
    return a is not None and b is not None and (a.co_code, a.co_consts, a.co_names) == (b.co_code, b.co_consts,
                                                                                        b.co_names)
