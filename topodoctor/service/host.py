"""A probed host as the probe's child sends it and the command decodes it: the snapshot, the
process judged, what each measurement pass measured or why it could not."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from topodoctor.core import codec
from topodoctor.model.environment import ProcessEnvironment
from topodoctor.model.snapshot import HostSnapshot, snapshot_from_data
from topodoctor.service.passes import Pass
from topodoctor.topology.view import HostView


@dataclass(frozen=True)
class ProbedHost:
    """What the probe child brought back: the snapshot, the process judged, measurements."""

    snapshot: HostSnapshot
    origin: str  # "live", "replay NAME", "snapshot NAME"
    process: ProcessEnvironment | None = None  # None where no process is judged (a saved result)
    measured: dict[str, Any] = field(default_factory=dict)
    missed: dict[str, str] = field(default_factory=dict)  # a pass that could not run: why, by its name

    @cached_property
    def view(self) -> HostView:
        """The snapshot's derived views (graph, pair connections, host tree), built once."""
        return HostView(self.snapshot)


def encode(host: ProbedHost) -> dict[str, Any]:
    """A ProbedHost as the child sends it through its pipe (JSON-able)."""
    return {
        "snapshot": codec.to_jsonable(host.snapshot),
        "origin": host.origin,
        "process": None if host.process is None else codec.to_jsonable(host.process),
        "measured": {k: codec.to_jsonable(v) for k, v in host.measured.items()},
        "missed": dict(host.missed),
    }


def decode(data: dict[str, Any], passes: Sequence[Pass], environment: bool = True) -> ProbedHost:
    """The ProbedHost a child sent, its snapshot and each pass's result checked as they are decoded;
    its process only where ``environment`` asks for it (else None, and not read)."""
    proc = data["process"] if environment else None
    if proc is not None:
        proc = codec.from_jsonable(ProcessEnvironment, proc, "process environment")
    return ProbedHost(
        snapshot_from_data(data["snapshot"], f"snapshot from {data['origin']}"),
        data["origin"],
        proc,
        {
            p.name: codec.from_jsonable(p.result, data["measured"][p.name], f"{p.name} result")
            for p in passes
            if p.name in data["measured"]
        },
        {p.name: str(data["missed"][p.name]) for p in passes if p.name in data.get("missed", {})},
    )


def resolve_types(passes: Sequence[Pass], environment: bool) -> None:
    """Resolve the field types of the classes an answer decodes into (the snapshot's, each pass's
    result's, the process's): done while the child probes, not after its answer."""
    classes: list[type] = [HostSnapshot, *(p.result for p in passes)]
    if environment:
        classes.append(ProcessEnvironment)
    for cls in classes:
        codec.resolve_types(cls)
