# As real libraries do: the package imports its kernels, so the harness must serve a candidate's text under the
# kernel's module name before anything imports it.
from minilib.ops import act, norm, rope  # noqa: F401
