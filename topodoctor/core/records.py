"""Frozen plain data whose methods are shared by every class: the snapshot's model.

``@dataclass(frozen=True)`` writes six methods for each class, compiling their source as the
class is made: on the GPU hosts' Python 3.12 the snapshot's model (24 classes) took 27 ms to
import, on the critical path of every live probe's child and of every command that reads a
snapshot. A ``Record`` subclass is made a dataclass as it is defined, with ``__init__`` alone
written for it; equality, hash, repr and the freezing come from here, and answer as the
dataclass's own do (tests/core/test_records.py holds them to it): a third of the compiling.

Type checkers see a frozen dataclass (``dataclass_transform``); at run time a field is set
once, by ``__init__``, and any later assignment or deletion raises ``FrozenInstanceError``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import Field, FrozenInstanceError, dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

_T = TypeVar("_T")
if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
elif sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # a marker for type checkers alone

    def dataclass_transform(**_: object) -> Callable[[_T], _T]:
        """Python 3.10's stand-in for ``typing.dataclass_transform``: the class unchanged."""
        return lambda cls: cls


_compared: dict[type, tuple[str, ...]] = {}
_hashed: dict[type, tuple[str, ...]] = {}
_shown: dict[type, tuple[str, ...]] = {}


def _names(cache: dict[type, tuple[str, ...]], cls: Any, keep: Callable[[Field[Any]], bool]) -> tuple[str, ...]:
    """The names of ``cls``'s fields that ``keep`` keeps, read once per class."""
    names = cache.get(cls)
    if names is None:
        names = cache[cls] = tuple(f.name for f in fields(cls) if keep(f))
    return names


def _compare(f: Field[Any]) -> bool:
    return f.compare


def _hash(f: Field[Any]) -> bool:  # dataclass hashes the compared fields unless a field says otherwise
    return f.compare if f.hash is None else f.hash


def _show(f: Field[Any]) -> bool:
    return f.repr


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
class Record:
    """A frozen dataclass whose subclasses share their methods (see the module)."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(eq=False, repr=False)(cls)  # __init__ alone: the class is changed in place

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__ or name not in self.__dataclass_fields__:  # type: ignore[attr-defined]
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = _names(_compared, self.__class__, _compare)  # as tuples, as dataclass compares: NaN is itself
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in _names(_hashed, self.__class__, _hash)))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(_shown, self.__class__, _show))
        return f"{self.__class__.__qualname__}({shown})"
