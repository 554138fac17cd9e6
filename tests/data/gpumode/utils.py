"""Helpers shared by the problems of this track, in the layout GPU MODE's problems use (written for kforge-bot's
tests: a CPU-friendly stand-in, not their code)."""

import torch


def close_enough(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float) -> list[str]:
    """Reasons `got` differs from `want` (empty: it does not)."""
    if got.shape != want.shape:
        return [f"shape {tuple(got.shape)} != {tuple(want.shape)}"]
    bad = (got - want).abs() > atol + rtol * want.abs()
    if bad.any():
        return [f"{int(bad.sum())} element(s) differ beyond rtol={rtol}, atol={atol}"]
    return []


def make_match_reference(reference, rtol: float = 1e-5, atol: float = 1e-8):
    """A check_implementation comparing an output with the reference's on the same data."""

    def check(data, output):
        want = reference(data)
        reasons = close_enough(output, want, rtol, atol)
        return (not reasons), "; ".join(reasons)

    return check


class DeterministicContext:
    """Deterministic algorithms inside, the previous setting restored after."""

    def __enter__(self):
        self.previous = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        return self

    def __exit__(self, *exc):
        torch.use_deterministic_algorithms(self.previous)
