"""What `kforge-bot check` compares for a kernel of each format: a candidate file (or the kernel as it is) against
its baseline, with a title saying which two. The one place the three formats differ in what a check means."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

from kforge_bot.errors import KforgeError
from kforge_bot.kernelspec import Implementation, KernelSpec, defines, kernel_implementation


class Comparison(NamedTuple):
    """The implementation judged, the one it is judged against, and a title naming both."""

    candidate: Implementation
    baseline: Implementation
    title: str


def resolve_candidate(spec: KernelSpec, candidate_path: Path | None) -> Comparison:
    """What `check` (and `recheck`) compares, following the spec's format.

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
            return Comparison(impl, spec.baseline, f"{candidate_path.name}:ModelNew vs {spec.kernel_file}:Model")
        impl = kernel_implementation(spec)
        if impl.symbol == "ModelNew":
            return Comparison(impl, spec.baseline, f"{spec.kernel_file}: ModelNew vs Model")
        return Comparison(spec.baseline, spec.baseline,
                          f"{spec.kernel_file}: Model vs itself (A/A: no candidate given)")
    if spec.format == "gpumode":  # the submission's custom_kernel against the problem's ref_kernel
        if candidate_path is None and spec.kernel is not None:
            return Comparison(spec.kernel, spec.baseline,
                              f"{spec.name}: submission.py:custom_kernel vs reference.py:ref_kernel")
        if candidate_path is None:
            return Comparison(spec.baseline, spec.baseline,
                              f"{spec.name}: ref_kernel vs itself (A/A: no submission.py)")
        impl = Implementation.from_file(candidate_path, spec.entry, root=spec.root)
        if _parses(impl.source) and not defines(impl.source, spec.entry):
            raise KforgeError(f"defines no top-level {spec.entry!r}", path=candidate_path,
                              hint="a GPU MODE submission defines custom_kernel(data)")
        return Comparison(impl, spec.baseline,
                          f"{candidate_path.name}:{spec.entry} vs {spec.name}/reference.py:ref_kernel")
    if candidate_path is not None:
        impl = spec.candidate_from_source(Implementation.from_file(candidate_path, spec.entry).source,
                                          candidate_path.name)
        if _parses(impl.source) and not spec.entry_file and not defines(impl.source, spec.entry):
            raise KforgeError(f"defines no top-level {spec.entry!r}", path=candidate_path,
                              hint=f"a candidate for kernel {spec.name!r} defines the same entry as {spec.kernel_file}")
        return Comparison(impl, spec.baseline, f"{candidate_path.name}:{spec.entry} vs {spec.kernel_file}:{spec.entry}")
    kernel = spec.baseline
    reference = spec.reference
    if reference == kernel:
        return Comparison(kernel, kernel,
                          f"{spec.kernel_file}:{spec.entry} vs itself (A/A: the manifest names no reference)")
    # The reference's path as the manifest names it where it is the kernel's own file (cpu/x.py, not x.py).
    where = spec.kernel_file if reference.source == kernel.source else reference.filename
    return Comparison(kernel, reference, f"{spec.kernel_file}:{spec.entry} vs reference {where}:{reference.symbol}")


def _parses(source: str) -> bool:
    """A candidate that does not parse is a compile error (exit 1, with the compiler's message), not a usage error."""
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True
