"""Records (core/records.py): the snapshot's model shares its equality, hash, repr and freezing
instead of six methods compiled per class, and they answer as a frozen dataclass's own do.
Each check builds, for every object of a real recording's snapshot, its twin in a class that
``dataclasses.make_dataclass(..., frozen=True)`` makes from the same fields, and compares them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import topodoctor.model.fitness as fitness_model
import topodoctor.model.snapshot as snapshot_model
from topodoctor.core.records import Record
from topodoctor.probe.replay import bundled_names
from topodoctor.probe.sources import probe_host

MODEL = [
    cls
    for module in (snapshot_model, fitness_model)
    for cls in vars(module).values()
    if isinstance(cls, type) and cls.__module__ == module.__name__ and dataclasses.is_dataclass(cls)
]
_twins: dict[type, type] = {}


def _twin_class(cls: type) -> type:
    """The same fields in a class dataclass writes every method of."""
    if cls not in _twins:
        specs = []
        for f in dataclasses.fields(cls):
            kw: dict[str, Any] = {"repr": f.repr, "compare": f.compare, "hash": f.hash}
            if f.default is not dataclasses.MISSING:
                kw["default"] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                kw["default_factory"] = f.default_factory
            specs.append((f.name, f.type, dataclasses.field(**kw)))
        twin = dataclasses.make_dataclass(cls.__name__, specs, frozen=True)
        twin.__qualname__ = cls.__qualname__
        _twins[cls] = twin
    return _twins[cls]


def _twin(value: Any) -> Any:
    """``value`` with every record in it replaced by its dataclass twin."""
    if isinstance(value, Record):
        cls = type(value)
        return _twin_class(cls)(**{f.name: _twin(getattr(value, f.name)) for f in dataclasses.fields(cls)})
    if isinstance(value, tuple):
        return tuple(_twin(v) for v in value)
    return value


def _records(value: Any) -> list[Record]:
    """Every record in ``value``, itself included."""
    found: list[Record] = []
    if isinstance(value, Record):
        found.append(value)
        for f in dataclasses.fields(value):
            found += _records(getattr(value, f.name))
    elif isinstance(value, tuple):
        for v in value:
            found += _records(v)
    return found


def test_every_model_class_takes_the_shared_methods() -> None:
    assert len(MODEL) >= 24
    for cls in MODEL:
        assert issubclass(cls, Record), cls
        shared = ("__eq__", "__hash__", "__repr__", "__setattr__", "__delattr__")
        assert all(getattr(cls, m) is getattr(Record, m) for m in shared), cls


@pytest.mark.parametrize("name", bundled_names())
def test_they_answer_as_dataclass_does(name: str) -> None:
    snap = probe_host(name).snapshot
    records = _records(snap)
    assert {type(r) for r in records} >= {snapshot_model.Gpu, snapshot_model.HostInfo, fitness_model.GpuFitness}
    for r in records:
        twin = _twin(r)
        assert repr(r) == repr(twin)
        assert hash(r) == hash(twin)
        same = dataclasses.replace(r)
        assert r == same and not r.__ne__(same) and hash(r) == hash(same)
        assert r.__eq__(twin) is NotImplemented  # another class: Python then asks the other side
        first = dataclasses.fields(r)[0].name  # as a frozen dataclass: no field set twice, none added, none deleted
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(r, first, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            r.extra = 0  # type: ignore[attr-defined]
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(r, first)
    # Each field's change is seen by both, and not seen where the field is not compared.
    gpu = snap.gpus[0]
    for f in dataclasses.fields(gpu):
        changed: dict[str, Any] = {f.name: "changed"}
        other = dataclasses.replace(gpu, **changed)
        assert (gpu == other) == (_twin(gpu) == _twin(other)) == (not f.compare)


def test_a_value_is_equal_to_itself_as_in_a_tuple() -> None:
    """dataclass compares field tuples, where an object is equal to itself (NaN included)."""
    link = snapshot_model.NvLinkErrors(float("nan"), 1, 2)  # type: ignore[arg-type]
    assert link == dataclasses.replace(link) and _twin(link) == _twin(dataclasses.replace(link))
    another_nan = snapshot_model.NvLinkErrors(float("nan"), 1, 2)  # type: ignore[arg-type]
    assert link != another_nan and _twin(link) != _twin(another_nan)
