"""The live NVML binding: the only module that imports pynvml (nvidia-ml-py).

It turns every pynvml answer into plain data at once (structs become dicts, ctypes arrays
become lists, bytes become str) and every failure into ``NvmlCallError``, so that what the
probe sees live is byte for byte what a recording can hold.
"""

from __future__ import annotations

import ctypes
import importlib
from typing import Any

from topodoctor.core.errors import ProbeUnavailable
from topodoctor.probe import warm_up
from topodoctor.probe.api import BINDING_FAILED, BINDING_MISSING, NvmlCallError

# Calls whose pynvml wrapper wants a caller-allocated struct; we allocate it here so the
# boundary stays "plain arguments in, plain data out". (struct class, pynvml function).
# pynvml hands the struct to C by value unless it is wrapped in byref(); passing it bare
# crashed the process on driver 580, so byref is not optional.
_STRUCT_OUT = {
    "nvmlDeviceGetGpuFabricInfoV": ("c_nvmlGpuFabricInfoV_t", "nvmlDeviceGetGpuFabricInfoV"),
    "nvmlDeviceGetGpuFabricInfo": ("c_nvmlGpuFabricInfo_t", "nvmlDeviceGetGpuFabricInfo"),
}


def plain(value: Any) -> Any:
    """Plain JSON data for a pynvml answer."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\x00")
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, ctypes.Structure):
        return {name: plain(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, ctypes.Array):
        return [plain(v) for v in value]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if type(value).__name__ == "nvmlFriendlyObject":  # pynvml's copy of a struct (process lists)
        return {name: plain(v) for name, v in vars(value).items()}
    if isinstance(value, ctypes._SimpleCData):
        return plain(value.value)
    if type(value).__name__ == "nvmlFriendlyObject":  # pynvml's struct-as-object (process lists)
        return {k: plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return str(value)


def _field_values(values: Any) -> list[dict[str, Any]]:
    """nvmlFieldValue_t holds a union; pick the member its valueType names."""
    members = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    out = []
    for v in values:
        member = members.get(v.valueType)
        number = getattr(v.value, member) if (member and v.nvmlReturn == 0) else None
        out.append({"field": v.fieldId, "scope": v.scopeId, "ret": v.nvmlReturn, "value": number})
    return out


class LiveNvml:
    """NvmlApi over the real library. Device handles appear to callers as ``"gpu:N"`` tokens."""

    def __init__(self) -> None:
        try:
            self._nv = importlib.import_module("pynvml")
        except ImportError:
            raise ProbeUnavailable("the nvidia-ml-py package is not installed (pip install nvidia-ml-py)") from None
        self._handles: dict[str, Any] = {}

    def _arg(self, a: Any) -> Any:
        if isinstance(a, str) and a.startswith("gpu:"):
            return self._handles[a]
        if isinstance(a, list):
            return [tuple(x) if isinstance(x, list) else x for x in a]
        return a

    def call(self, fn: str, *args: Any) -> Any:
        """Call the pynvml function ``fn`` (or one this binding wraps itself) and return plain data;
        any failure is an NvmlCallError with NVML's code."""
        nv = self._nv
        real = [self._arg(a) for a in args]
        try:
            if fn in _STRUCT_OUT:
                struct_name, func_name = _STRUCT_OUT[fn]
                struct = getattr(nv, struct_name)()
                getattr(nv, func_name)(real[0], ctypes.byref(struct))
                return plain(struct)
            func = getattr(nv, fn, None)
            if func is None:
                raise NvmlCallError(BINDING_MISSING, f"nvidia-ml-py has no {fn}")
            result = func(*real)
        except nv.NVMLError as exc:
            raise NvmlCallError(int(exc.value)) from None
        except NvmlCallError:
            raise
        except AttributeError as exc:
            raise NvmlCallError(BINDING_MISSING, str(exc)) from None
        except (TypeError, ValueError, ctypes.ArgumentError, OSError) as exc:
            raise NvmlCallError(BINDING_FAILED, f"{type(exc).__name__}: {exc}") from None
        if fn == "nvmlDeviceGetHandleByIndex":
            token = f"gpu:{args[0]}"
            self._handles[token] = result
            return token
        if fn == "nvmlDeviceGetFieldValues":
            return _field_values(result)
        return plain(result)


def warmed() -> LiveNvml:
    """The live binding for a probe: the driver's slow first answers are asked in threads
    (probe/warm_up.py) while the binding loads here, and waited for before the probe's first call."""
    warm = warm_up.take()
    try:
        warm.load_binding()
        return LiveNvml()
    finally:
        warm.join()
