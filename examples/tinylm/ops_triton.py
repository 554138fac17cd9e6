"""The model's kernels from the bundled Triton examples (examples/triton, an import root of the workloads in
examples/kforge.yaml), imported as a user of those kernels imports them."""

from __future__ import annotations

from rmsnorm import rmsnorm  # noqa: F401
from softmax import softmax  # noqa: F401
from swiglu import swiglu  # noqa: F401
