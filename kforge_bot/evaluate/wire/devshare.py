"""Device memory one process hands another as a file descriptor: outputs that never cross the host.

A worker's outputs reach the bot, which compares them. Through the host that is a device-to-host copy, a
file in memory-backed storage and a host-to-device copy back, each at host speed: on the H200, seconds per
gigabyte, the largest part of a KernelBench level-1 evaluation. Here the worker copies each output into
device memory made with CUDA's virtual memory API (cuMemCreate) for export as a POSIX file descriptor; the fd
travels over a Unix socket (SCM_RIGHTS) and the bot maps the same memory into its own address space.

Why this API and not torch's CUDA IPC: legacy IPC handles (cudaIpcGetMemHandle) name the exporting process
by its pid and fail across PID namespaces, and every worker runs in its own (the sandbox). A file
descriptor handed over a socket needs no pid.

The importer trusts nothing it is given: an fd that is no CUDA allocation, or one smaller than the size it
claims, fails to import or to map (a `DeviceShareError`). What the memory holds is the exporter's output, which
the bot checks like any other.

Only the CUDA driver (libcuda) is used, through ctypes: no extra package on a runner.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import socket
import threading
from typing import Any

# Enum values from CUDA's cuda.h (driver API, CUDA 10.2 and later).
_ALLOCATION_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_HANDLE_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_LOCATION_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_ACCESS_READWRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_GRANULARITY_MINIMUM = 0  # CU_MEM_ALLOC_GRANULARITY_MINIMUM
_ATTR_POSIX_FD_SUPPORTED = 103  # CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
_ATTR_VMM_SUPPORTED = 102  # CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED

MAX_FDS_PER_MESSAGE = 64


class DeviceShareError(RuntimeError):
    """A driver call failed, or a handed-over fd is not the allocation it claims to be."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_driver: list[Any] = []
_lock = threading.Lock()
_bound_torch: list[Any] = []


def bind_torch() -> None:
    """Bind torch now. A worker calls this before any user code runs: imported at the first export, after the
    harness is hidden, `torch` would be whatever a candidate had put in sys.modules by then."""
    if not _bound_torch:
        _bound_torch.append(importlib.import_module("torch"))


def _torch() -> Any:
    if not _bound_torch:
        bind_torch()  # the bot, which imports torch only when it compares (see evaluate.judge)
    return _bound_torch[0]


def _cuda() -> Any:
    with _lock:
        if not _driver:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
            except OSError as exc:
                raise DeviceShareError(f"no CUDA driver library: {exc}") from None
            _check(lib.cuInit(0), "cuInit")
            _driver.append(lib)
    return _driver[0]


def _check(code: int, what: str) -> None:
    if code != 0:
        lib = _driver[0] if _driver else None
        name = ctypes.c_char_p()
        if lib is not None and lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
            raise DeviceShareError(f"{what} failed: {name.value.decode()} ({code})")
        raise DeviceShareError(f"{what} failed with CUDA error {code}")


def _use_primary_context(device: int) -> None:
    """Make the device's primary context (the one torch uses) current on this thread."""
    lib = _cuda()
    ctx = ctypes.c_void_p()
    _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), ctypes.c_int(device)), "cuDevicePrimaryCtxRetain")
    _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    # Retained once per call: release the extra reference (the context stays alive while torch holds it).
    lib.cuDevicePrimaryCtxRelease(ctypes.c_int(device))


def _prop(device: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type = _ALLOCATION_PINNED
    prop.requestedHandleTypes = _HANDLE_POSIX_FD
    prop.location = _Location(_LOCATION_DEVICE, device)
    return prop


def supported(device: int = 0) -> str | None:
    """None where this device can export memory as fds; otherwise why not."""
    try:
        lib = _cuda()
        dev = ctypes.c_int()
        _check(lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(device)), "cuDeviceGet")
        for attribute, what in ((_ATTR_VMM_SUPPORTED, "virtual memory management"),
                                (_ATTR_POSIX_FD_SUPPORTED, "POSIX file descriptor handles")):
            value = ctypes.c_int()
            _check(lib.cuDeviceGetAttribute(ctypes.byref(value), ctypes.c_int(attribute), dev), "cuDeviceGetAttribute")
            if not value.value:
                return f"the device does not support {what}"
    except DeviceShareError as exc:
        return str(exc)
    return None


def padded_size(nbytes: int, device: int = 0) -> int:
    lib = _cuda()
    granularity = ctypes.c_size_t()
    prop = _prop(device)
    _check(lib.cuMemGetAllocationGranularity(ctypes.byref(granularity), ctypes.byref(prop), _GRANULARITY_MINIMUM),
           "cuMemGetAllocationGranularity")
    step = max(1, granularity.value)
    return max(step, (nbytes + step - 1) // step * step)


class _Mapping:
    """An allocation handle mapped at a reserved device address; `close()` unmaps and releases it."""

    def __init__(self, handle: int, size: int, device: int) -> None:
        lib = _cuda()
        self.handle, self.size, self.device = handle, size, device
        self.address = ctypes.c_uint64()
        self._closed = False
        _check(lib.cuMemAddressReserve(ctypes.byref(self.address), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                       ctypes.c_uint64(0), ctypes.c_uint64(0)), "cuMemAddressReserve")
        try:
            _check(lib.cuMemMap(self.address, ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_uint64(handle),
                                ctypes.c_uint64(0)), "cuMemMap")
            try:
                access = _AccessDesc(_Location(_LOCATION_DEVICE, device), _ACCESS_READWRITE)
                _check(lib.cuMemSetAccess(self.address, ctypes.c_size_t(size), ctypes.byref(access),
                                          ctypes.c_size_t(1)), "cuMemSetAccess")
            except DeviceShareError:
                lib.cuMemUnmap(self.address, ctypes.c_size_t(size))
                raise
        except DeviceShareError:
            lib.cuMemAddressFree(self.address, ctypes.c_size_t(size))
            raise

    def tensor(self, nbytes: int, closes: bool = False) -> Any:
        """The first `nbytes` as a torch uint8 tensor on the device. `closes`: the mapping is closed once the last
        tensor made from it is freed (else it is valid until `close()`)."""
        torch = _torch()
        if nbytes > self.size:
            raise DeviceShareError(f"{nbytes} bytes asked of a {self.size}-byte mapping")
        owner = _ArrayInterface(self.address.value, nbytes, self, closes)
        return torch.as_tensor(owner, device=f"cuda:{self.device}")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        lib = _cuda()
        _use_primary_context(self.device)
        lib.cuCtxSynchronize()  # no queued kernel may still read what is unmapped
        lib.cuMemUnmap(self.address, ctypes.c_size_t(self.size))
        lib.cuMemAddressFree(self.address, ctypes.c_size_t(self.size))
        lib.cuMemRelease(ctypes.c_uint64(self.handle))


class _ArrayInterface:
    """What torch.as_tensor reads to wrap device memory it did not allocate. The tensor holds this object until
    its storage is freed, so a mapping that `closes` lives exactly as long as the tensors made from it."""

    def __init__(self, address: int, nbytes: int, mapping: _Mapping, closes: bool) -> None:
        self._mapping, self._closes = mapping, closes
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 2, "strides": None}

    def __del__(self) -> None:
        if self._closes:
            try:
                self._mapping.close()
            except DeviceShareError:
                pass  # at interpreter exit the driver may be gone already


def _map_or_release(handle: ctypes.c_uint64, size: int, device: int) -> _Mapping:
    """`handle` mapped; released if it cannot be (nothing else holds it then)."""
    try:
        return _Mapping(handle.value, size, device)
    except DeviceShareError:
        _cuda().cuMemRelease(handle)
        raise


class ExportedBuffer:
    """Device memory this process made for export: write into `tensor(n)`, hand over `export_fd()`."""

    def __init__(self, nbytes: int, device: int = 0) -> None:
        _use_primary_context(device)
        lib = _cuda()
        size = padded_size(nbytes, device)
        handle = ctypes.c_uint64()
        prop = _prop(device)
        _check(lib.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), ctypes.c_uint64(0)),
               "cuMemCreate")
        self._mapping = _map_or_release(handle, size, device)
        self.nbytes = nbytes

    @property
    def size(self) -> int:
        return self._mapping.size

    def tensor(self, nbytes: int | None = None) -> Any:
        return self._mapping.tensor(self.nbytes if nbytes is None else nbytes)

    def export_fd(self) -> int:
        """A new fd for the allocation (the caller closes it once sent)."""
        lib = _cuda()
        fd = ctypes.c_int(-1)
        _check(lib.cuMemExportToShareableHandle(ctypes.byref(fd), ctypes.c_uint64(self._mapping.handle),
                                                _HANDLE_POSIX_FD, ctypes.c_uint64(0)), "cuMemExportToShareableHandle")
        return fd.value

    def close(self) -> None:
        self._mapping.close()


class ImportedBuffer:
    """Another process's exported allocation, mapped here. `size` is what the exporter claimed; mapping fails
    if the allocation behind the fd is smaller. The mapping is closed when the last tensor made from it is
    freed (never while a tensor could still read it), or by `close()` if none was made."""

    def __init__(self, fd: int, size: int, device: int = 0) -> None:
        _use_primary_context(device)
        lib = _cuda()
        if size <= 0 or size != padded_size(size, device):
            raise DeviceShareError(f"a shared allocation's size must be a positive multiple of the granularity "
                                   f"(got {size})")
        handle = ctypes.c_uint64()
        _check(lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _HANDLE_POSIX_FD),
               "cuMemImportFromShareableHandle")
        self._mapping = _map_or_release(handle, size, device)
        self._made = False  # a tensor was made from it: the tensors close the mapping, not close()

    @property
    def size(self) -> int:
        return self._mapping.size

    def tensor(self, nbytes: int) -> Any:
        self._made = True
        return self._mapping.tensor(nbytes, closes=True)

    def close(self) -> None:
        """Only for a buffer no tensor was made from."""
        if not self._made:
            self._mapping.close()


def send_fds(sock: socket.socket, message: bytes, fds: list[int]) -> None:
    """One message and its fds over a Unix socket (SCM_RIGHTS)."""
    socket.send_fds(sock, [message], fds)


def receive_fds(sock: socket.socket, max_bytes: int = 1 << 16) -> tuple[bytes, list[int]]:
    """One message and the fds that came with it; fds beyond MAX_FDS_PER_MESSAGE are closed by the kernel."""
    message, fds, _flags, _addr = socket.recv_fds(sock, max_bytes, MAX_FDS_PER_MESSAGE)
    return message, list(fds)


def close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
