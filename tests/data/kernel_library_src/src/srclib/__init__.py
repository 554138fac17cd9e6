from srclib.ops.mm import mm
from srclib.ops.rms_norm import RMSNormFunction, rms_norm_forward
from srclib.ops.rope import rope

__all__ = ["mm", "rope", "rms_norm_forward", "RMSNormFunction"]
