"""Frozen dataclasses to JSON and back, checked against their type hints.

Every document topodoctor writes (snapshots, recordings, bandwidth results, expectations)
goes through here, so a corrupt or foreign file fails with one message naming the first
field that does not fit, instead of a KeyError deep inside a rule.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from topodoctor.core import fileio
from topodoctor.core.errors import InputError
from topodoctor.core.fileio import dumps_strict
from topodoctor.core.probed import ProbeError, Unsupported

D = TypeVar("D")

_hints_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _hints_cache:
        _hints_cache[cls] = typing.get_type_hints(cls)
    return _hints_cache[cls]


def resolve_types(cls: type) -> None:
    """Resolve the field types of ``cls`` and of every dataclass it holds, once per process: the
    first decode of a snapshot spends most of its time here, which a caller can do while it
    waits for the document (the probe's child)."""
    todo: list[Any] = [cls]
    while todo:
        tp = todo.pop()
        if dataclasses.is_dataclass(tp) and isinstance(tp, type):
            if tp in _hints_cache:
                continue
            todo.extend(_hints(tp).values())
        else:
            todo.extend(get_args(tp))


def to_jsonable(obj: Any) -> Any:
    """Plain JSON data for a dataclass tree. Unsupported and ProbeError become tagged objects."""
    if isinstance(obj, Unsupported):
        return {"unsupported": obj.reason}
    if isinstance(obj, ProbeError):
        return {"probe_error": obj.error, "call": obj.call, "code": obj.code}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, float) and obj != obj:  # NaN is not JSON: say "not measured"
        return None
    return obj


class _Mismatch(Exception):
    def __init__(self, where: str, expected: str, got: Any) -> None:
        shown = json.dumps(got)[:60] if _is_json(got) else type(got).__name__
        super().__init__(f"{where or '<root>'}: expected {expected}, got {shown}")


def _is_json(v: Any) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True


def _decode(tp: Any, data: Any, where: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return data
    if origin is Union or origin is types.UnionType:
        errors = []
        for arm in _order_arms(get_args(tp), data):
            try:
                return _decode(arm, data, where)
            except _Mismatch as exc:
                errors.append(exc)
        raise errors[0] if len(errors) == 1 else _Mismatch(where, _name(tp), data)
    if tp is type(None):
        if data is not None:
            raise _Mismatch(where, "null", data)
        return None
    if tp is Unsupported:
        if not (isinstance(data, dict) and set(data) == {"unsupported"}):
            raise _Mismatch(where, "unsupported marker", data)
        return Unsupported(str(data["unsupported"]))
    if tp is ProbeError:
        if not (isinstance(data, dict) and "probe_error" in data):
            raise _Mismatch(where, "probe_error marker", data)
        code = data.get("code")
        return ProbeError(str(data["probe_error"]), str(data.get("call", "")), code if isinstance(code, int) else None)
    if origin is Literal:
        if data not in get_args(tp):
            raise _Mismatch(where, " | ".join(repr(a) for a in get_args(tp)), data)
        return data
    if origin is tuple:
        args = get_args(tp)
        if not isinstance(data, list):
            raise _Mismatch(where, "list", data)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(data))
        if len(args) != len(data):
            raise _Mismatch(where, f"list of {len(args)}", data)
        return tuple(_decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, data)))
    if origin is dict:
        key_t, val_t = get_args(tp)
        if not isinstance(data, dict):
            raise _Mismatch(where, "object", data)
        out = {}
        for k, v in data.items():
            key = int(k) if key_t is int and isinstance(k, str) and k.lstrip("-").isdigit() else k
            out[_decode(key_t, key, f"{where}.key")] = _decode(val_t, v, f"{where}.{k}")
        return out
    if dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, data, where)
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise _Mismatch(where, "number", data)
        return float(data)
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise _Mismatch(where, "integer", data)
        return data
    if tp in (str, bool):
        if not isinstance(data, tp):
            raise _Mismatch(where, tp.__name__, data)
        return data
    raise TypeError(f"codec cannot decode {tp!r}")


def _order_arms(arms: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """Try the markers first when the data carries one, so errors name the right arm."""
    if isinstance(data, dict) and ("unsupported" in data or "probe_error" in data):
        return tuple(sorted(arms, key=lambda a: a not in (Unsupported, ProbeError)))
    return arms


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _decode_dataclass(cls: Any, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise _Mismatch(where, cls.__name__, data)
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        path = f"{where}.{f.name}" if where else f.name
        if f.name in data:
            kwargs[f.name] = _decode(hints[f.name], data[f.name], path)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _Mismatch(path, "a value", "missing")
    return cls(**kwargs)


def from_jsonable(cls: type[D], data: Any, what: str = "document") -> D:
    """Build ``cls`` from JSON data, raising InputError that names the first bad field."""
    try:
        return typing.cast(D, _decode(cls, data, ""))
    except _Mismatch as exc:
        raise InputError(f"{what} does not match its schema: {exc}") from None
    except RecursionError:
        raise InputError(f"{what} is nested too deeply") from None


def read_json(path: Path | str, what: str, timeout_s: float | None = None) -> Any:
    """Load JSON from a user-named file: bounded in time and size, strict (see ``fileio``)."""
    if timeout_s is None:
        return fileio.read_json(path, what)
    return fileio.read_json(path, what, timeout_s=min(timeout_s, fileio.DEFAULT_TIMEOUT_S))


def check_header(data: Any, kind: str, version: int, what: str) -> None:
    """Every document carries ``kind`` and ``schema_version``; refuse foreign or newer ones."""
    if not isinstance(data, dict):
        raise InputError(f"{what} is not a topodoctor {kind} (top level is not an object)")
    got_kind = data.get("kind")
    if got_kind != kind:
        raise InputError(f"{what} is not a topodoctor {kind} (kind={got_kind!r})")
    got = data.get("schema_version")
    if got != version:
        raise InputError(f"{what} has schema_version {got!r}; this topodoctor reads version {version}")


def dumps(obj: Any) -> str:
    """Strict JSON text of a dataclass tree (NaN becomes null; infinity is refused)."""
    return dumps_strict(to_jsonable(obj), indent=1) + "\n"
