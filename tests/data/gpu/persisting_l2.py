"""The reference's own work, with its input kept in L2 between samples (gpu-mode/pygpubench#49): a persisting-L2
carveout reserved through the CUDA driver, and a stream access-policy window marking the input persisting, so
the settle's cache flush (ordinary writes) cannot evict it. Honest in its answer; its time must not gain."""

import ctypes

import torch
from torch import nn

_LIMIT_PERSISTING_L2 = 0x06  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1  # CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
_NORMAL, _PERSISTING = 0, 2  # CU_ACCESS_PROPERTY_*
_driver = ctypes.CDLL("libcuda.so.1")
_driver.cuCtxSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
_driver.cuStreamSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]


def _largest_carveout() -> int:
    value, device = ctypes.c_int(), ctypes.c_int()
    _driver.cuCtxGetDevice(ctypes.byref(device))
    _driver.cuDeviceGetAttribute(ctypes.byref(value), 108, device)  # ..._MAX_PERSISTING_L2_CACHE_SIZE
    return value.value


class _Window(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class _Value(ctypes.Union):
    _fields_ = [("window", _Window), ("pad", ctypes.c_char * 64)]


class ModelNew(nn.Module):
    def forward(self, x):
        if not torch.cuda.is_current_stream_capturing():
            _driver.cuCtxSetLimit(_LIMIT_PERSISTING_L2, _largest_carveout())  # each call: a reset is undone
        value = _Value()
        value.window = _Window(x.data_ptr(), x.numel() * x.element_size(), 1.0, _PERSISTING, _NORMAL)
        _driver.cuStreamSetAttribute(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream),
                                     _ATTRIBUTE_ACCESS_POLICY_WINDOW, ctypes.byref(value))
        return x.sum()
