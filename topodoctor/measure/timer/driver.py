"""libcuda.so.1 (the CUDA driver API, installed with the driver) through ctypes: the calls the
copy timer makes, with their argument types, each checked."""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from ctypes import POINTER, c_char_p, c_float, c_int, c_size_t, c_uint, c_uint32, c_uint64, c_void_p
from typing import Any

_SIGNATURES: dict[str, list[Any]] = {
    "cuInit": [c_uint],
    "cuDriverGetVersion": [POINTER(c_int)],
    "cuDeviceGetCount": [POINTER(c_int)],
    "cuDeviceGet": [POINTER(c_int), c_int],
    "cuDeviceGetName": [c_char_p, c_int, c_int],
    "cuDeviceGetPCIBusId": [c_char_p, c_int, c_int],
    "cuDevicePrimaryCtxRetain": [POINTER(c_void_p), c_int],
    "cuCtxSetCurrent": [c_void_p],
    "cuCtxSynchronize": [],
    "cuDeviceCanAccessPeer": [POINTER(c_int), c_int, c_int],
    "cuCtxEnablePeerAccess": [c_void_p, c_uint],
    "cuMemAlloc_v2": [POINTER(c_uint64), c_size_t],
    "cuMemsetD8_v2": [c_uint64, ctypes.c_ubyte, c_size_t],
    "cuMemsetD8Async": [c_uint64, ctypes.c_ubyte, c_size_t, c_void_p],
    "cuMemHostAlloc": [POINTER(c_void_p), c_size_t, c_uint],
    "cuMemHostGetDevicePointer_v2": [POINTER(c_uint64), c_void_p, c_uint],
    "cuMemcpyHtoD_v2": [c_uint64, c_void_p, c_size_t],
    "cuMemcpyDtoH_v2": [c_void_p, c_uint64, c_size_t],
    "cuMemcpyPeerAsync": [c_uint64, c_void_p, c_uint64, c_void_p, c_size_t, c_void_p],
    "cuMemcpyHtoDAsync_v2": [c_uint64, c_void_p, c_size_t, c_void_p],
    "cuMemcpyDtoHAsync_v2": [c_void_p, c_uint64, c_size_t, c_void_p],
    "cuStreamCreate": [POINTER(c_void_p), c_uint],
    "cuStreamWaitValue32_v2": [c_void_p, c_uint64, c_uint32, c_uint],
    "cuEventCreate": [POINTER(c_void_p), c_uint],
    "cuEventRecord": [c_void_p, c_void_p],
    "cuEventSynchronize": [c_void_p],
    "cuEventElapsedTime": [POINTER(c_float), c_void_p, c_void_p],
    "cuEventDestroy_v2": [c_void_p],
    "cuGetErrorName": [c_int, POINTER(c_char_p)],
}


class Driver:
    """libcuda with argument types set; every call checked."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        for name, args in _SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.argtypes, fn.restype = args, c_int
        self.libc = ctypes.CDLL(None)
        self.libc.memcmp.argtypes, self.libc.memcmp.restype = [c_void_p, c_void_p, c_size_t], c_int

    def __call__(self, name: str, *args: Any) -> None:
        rc = int(getattr(self.lib, name)(*args))
        if rc not in (0,):
            raise RuntimeError(f"{name}: {self.error_name(rc)}")

    def error_name(self, rc: int) -> str:
        """The driver's name for a CUresult (``cuGetErrorName``), or ``CUDA error N`` for one it does not name."""
        text = c_char_p()
        self.lib.cuGetErrorName(rc, ctypes.byref(text))
        return (text.value or b"").decode() or f"CUDA error {rc}"


# When the driver's start in ``start_in_thread`` began and ended (CLOCK_MONOTONIC, as every clock
# reading a timer answers); empty where it did not run or failed.
warm_clock: dict[str, float] = {}


def start_in_thread() -> None:
    """Start the driver (``cuInit``) in a thread now, while the caller loads the rest of the timer:
    the driver's start takes tenths of a second and releases the GIL. The timer's own ``cuInit``
    then finds it started (or waits for it); any failure here is left for that call to report."""

    def start() -> None:
        t0 = time.monotonic()
        with contextlib.suppress(Exception):
            Driver()("cuInit", 0)
            warm_clock.update(driver_start=t0, driver_ready=time.monotonic())

    threading.Thread(target=start, name="cuInit", daemon=True).start()
