"""A library that asks for its GPU when imported, as some Triton libraries do (their device's properties, to pick
block sizes): on a machine without one, its import raises from inside torch.cuda."""
from gpulib import runtime  # noqa: F401
from gpulib.ops.act import scaled_relu  # noqa: F401
