"""The driver's slow first answers, asked in threads straight through ctypes while the binding
(nvidia-ml-py) loads in the probe's child (probe/nvml.py ``warmed``).

NVML keeps what its first calls in a process learn: on an H200 with driver 580 the first
``nvmlInit`` cost 9-14 ms, the first handle of a GPU 7 ms, its first CPU affinity 10-12 ms, and
the calls below 0.2-2 ms each (ECC mode, current PCIe generation and remapped rows 1.8-2.3 ms;
MIG mode, PCIe replays, pending retired pages 0.2-0.5 ms), where the same calls a second time
took 1.8 ms for all 35 of a topology probe together. The binding's own import takes 13-18 ms
there, so these calls go to the library itself, by their C signatures (nvml.h), and overlap it
(ctypes lets the GIL go while the driver answers); the probe then makes the same calls through the binding
and judges their answers. Nothing is judged here and every failure is passed over: the probe
meets it again."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import sys
import threading

LIBRARY = "libnvidia-ml.so.1"  # the name nvidia-ml-py loads on Linux
SUCCESS, NOT_SUPPORTED = 0, 3
# Per GPU, after its handle: (function, the C types of its out arguments), as nvml.h declares
# them (nvmlEnableState_t is an unsigned int).
SLOW_FIRST_CALLS: tuple[tuple[str, tuple[type[ctypes.c_uint], ...]], ...] = (
    ("nvmlDeviceGetEccMode", (ctypes.c_uint, ctypes.c_uint)),
    ("nvmlDeviceGetCurrPcieLinkGeneration", (ctypes.c_uint,)),
    ("nvmlDeviceGetRemappedRows", (ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint)),
    ("nvmlDeviceGetMigMode", (ctypes.c_uint, ctypes.c_uint)),
    ("nvmlDeviceGetPcieReplayCounter", (ctypes.c_uint,)),
    ("nvmlDeviceGetRetiredPagesPendingStatus", (ctypes.c_uint,)),
)
AFFINITY_SCOPE_NODE = 0
# While the warm-up runs, the thread holding the GIL (the binding's import) gives it up this soon
# to the warm-up thread coming back from the driver; at the default 5 ms each of its dozen calls
# would wait that long.
_SWITCH_S = 1e-4


class WarmUp:
    """The driver's first answers in a background thread, started at once; ``load_binding`` then
    imports the binding in the caller's thread meanwhile, and ``join`` waits for the driver
    before the probe's own first call. NVML is left initialised (the thread's one reference),
    so the probe's ``nvmlShutdown`` does not tear it down: the process's end closes the
    driver's files."""

    def __init__(self) -> None:
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._interval, _SWITCH_S))
        self._thread = threading.Thread(target=warm_driver, name="nvml-warm-up", daemon=True)
        self._thread.start()

    def load_binding(self) -> None:
        """Import the binding (nvidia-ml-py) while the driver answers the thread."""
        with contextlib.suppress(Exception):  # a broken binding is the probe's to report
            importlib.import_module("pynvml")

    def join(self) -> None:
        """Wait for the warm-up; a driver that hangs it hangs the probe too, which its budget ends."""
        self._thread.join()
        sys.setswitchinterval(self._interval)


_begun: WarmUp | None = None  # begun by the probe's child before its imports (``begin``), for ``take``


def begin() -> None:
    """Start the warm-up now: a probe's child calls it first of all, so that the driver's first
    answers (about 55 ms on a 2 x H200 host) overlap the child's own imports, not only the
    binding's."""
    global _begun
    if _begun is None:
        _begun = WarmUp()


def take() -> WarmUp:
    """The warm-up ``begin`` started, handed over once; or one started now."""
    global _begun
    warm, _begun = _begun or WarmUp(), None
    return warm


def warm_driver() -> None:
    """``nvmlInit_v2`` and every GPU's handle, then each GPU's CPU affinity in a second thread
    while this one asks ``SLOW_FIRST_CALLS`` (the first affinity is the slowest first answer, and
    the driver answers the two side by side: 29 against 32 ms on one H200); a GPU that answers
    anything but success or NOT_SUPPORTED is left at that call."""
    try:
        lib = ctypes.CDLL(LIBRARY)
        if lib.nvmlInit_v2() != SUCCESS:
            return
        count = ctypes.c_uint()
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != SUCCESS:
            return
    except (OSError, AttributeError):  # no library, or one without these calls
        return
    handles = []
    for index in range(count.value):
        handle = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)) == SUCCESS:
            handles.append(handle)
    affinities = threading.Thread(target=_affinities, args=(lib, handles), name="nvml-warm-up-affinity", daemon=True)
    affinities.start()
    for handle in handles:
        for name, outs in SLOW_FIRST_CALLS:
            try:
                got = getattr(lib, name)(handle, *(ctypes.byref(t()) for t in outs))
            except AttributeError:  # an older driver without this call
                continue
            if got not in (SUCCESS, NOT_SUPPORTED):
                break
    affinities.join()


def _affinities(lib: ctypes.CDLL, handles: list[ctypes.c_void_p]) -> None:
    words = max(1, ((os.cpu_count() or 1) + 63) // 64)
    for handle in handles:
        mask = (ctypes.c_ulonglong * words)()
        with contextlib.suppress(AttributeError):
            lib.nvmlDeviceGetCpuAffinityWithinScope(
                handle, ctypes.c_uint(words), mask, ctypes.c_uint(AFFINITY_SCOPE_NODE)
            )
