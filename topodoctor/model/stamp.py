"""When, where and on which GPUs a result was measured: the fields every result carries.

A result class takes them by deriving from ``Stamped`` (keyword-only fields with defaults, so
the class's own fields and constructors stay as they are); ``stamped`` sets them once, where
a result is made (service/stamping.py). With them a fleet's history can order a node's
results in time, follow a GPU that moved to another node or was replaced (its UUID and
serial), and see its health counters rise across days (``counters``: the values when the
result was measured, counted since the driver loaded or the port came up).

Results written before these fields decode with ``measured_at`` None: the fleet takes the
file's modification time then, and says so.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # the check's outcome derives from Stamped: its import stays free of the snapshot's
    from topodoctor.model.snapshot import HostSnapshot

# The GPU counters a history follows (per GPU, NVLink counters summed over the GPU's links).
GPU_COUNTERS = ("pcie_replay", "nvlink_replay", "nvlink_recovery", "nvlink_crc", "remapped_rows")


@dataclass(frozen=True)
class GpuId:
    """A GPU as a result names it: NVML index, UUID, serial and PCI bus id (None where not read)."""

    index: int
    uuid: str | None
    serial: str | None
    bus_id: str | None


@dataclass(frozen=True)
class CounterReading:
    """One health counter when the result was measured: ``subject`` GPU3 or mlx5_0/1, ``counter`` one of
    GPU_COUNTERS or a port's error counter (model.fitness.NIC_PORT_COUNTERS)."""

    subject: str
    counter: str
    value: int


@dataclass(frozen=True)
class Stamped:
    """The mixin every result derives from: when (``measured_at``, UTC, ISO 8601), on which node
    (``node``: SLURMD_NODENAME where set, else the host name), its GPUs and its counters."""

    measured_at: str | None = field(default=None, kw_only=True)
    node: str | None = field(default=None, kw_only=True)
    gpu_ids: tuple[GpuId, ...] = field(default=(), kw_only=True)
    counters: tuple[CounterReading, ...] = field(default=(), kw_only=True)


S = TypeVar("S", bound=Stamped)


def utc_iso(epoch_s: float) -> str:
    """Seconds since the epoch as UTC ISO 8601 to the second: ``2026-11-26T18:20:03Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


def node_name(environ: Mapping[str, str], hostname: str | None) -> str | None:
    """The node as the prolog names it: ``SLURMD_NODENAME`` where Slurm set it (a node name need
    not be a host name), else the host name the probe read."""
    named = environ.get("SLURMD_NODENAME", "").strip()
    return named or hostname or None


def parse_iso(text: str) -> float:
    """An ISO 8601 time as seconds since the epoch (a time without a zone is taken as UTC);
    ValueError when it is not one."""
    # Only readers of results parse times: a prolog's check, which writes one, never loads datetime.
    from datetime import datetime, timezone

    t = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.timestamp()


def _str(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _sum(values: list[object]) -> int | None:
    ints = [_int(v) for v in values]
    return sum(i for i in ints if i is not None) if any(i is not None for i in ints) else None


def gpu_ids(snap: HostSnapshot) -> tuple[GpuId, ...]:
    """Each GPU's identity as the probe read it."""
    return tuple(GpuId(g.index, _str(g.uuid), _str(g.serial), _str(g.bus_id)) for g in snap.gpus)


def readings(snap: HostSnapshot) -> tuple[CounterReading, ...]:
    """The counters a history follows, where the probe read them: the GPUs' PCIe replays (the
    later of the fitness readings where taken), NVLink replay / recovery / CRC summed over each
    GPU's links, remapped HBM rows, and every error counter of every RDMA port."""
    out: list[CounterReading] = []
    for g in snap.gpus:
        if g.lost is not None:
            continue
        where = f"GPU{g.index}"
        replay = _int(g.fitness.end.pcie.replay)
        rows: Any = g.remapped_rows  # RemappedRows, or Unsupported / ProbeError (no counts)
        values = {
            "pcie_replay": replay if replay is not None else _int(g.pcie.replay_counter),
            "nvlink_replay": _sum([ln.errors.replay for ln in g.nvlinks]),
            "nvlink_recovery": _sum([ln.errors.recovery for ln in g.nvlinks]),
            "nvlink_crc": _sum([ln.errors.crc for ln in g.nvlinks]),
            "remapped_rows": _sum([getattr(rows, "correctable", None), getattr(rows, "uncorrectable", None)]),
        }
        out += [CounterReading(where, name, v) for name, v in values.items() if v is not None]
    for nic in snap.nics:
        for p in nic.ports:
            for name, start in p.counters_start.items():
                v = _int(p.counters_end.get(name, start))
                if v is not None:
                    out.append(CounterReading(f"{nic.name}/{p.port}", name, v))
    return tuple(out)


def stamped(result: S, snapshot: HostSnapshot | None, node: str | None, at_s: float) -> S:
    """``result`` with its time, node, GPUs and counters set (GPUs and counters from ``snapshot``
    where there is one)."""
    extra: dict[str, Any] = {"measured_at": utc_iso(at_s), "node": node}
    if snapshot is not None:
        extra["gpu_ids"] = gpu_ids(snapshot)
        extra["counters"] = readings(snapshot)
    return dataclasses.replace(result, **extra)


def stamp_json(result: Stamped) -> dict[str, Any]:
    """The stamp as a JSON document holds it, for documents built by hand (a check's)."""
    return {
        "measured_at": result.measured_at,
        "node": result.node,
        "gpu_ids": [dataclasses.asdict(g) for g in result.gpu_ids],
        "counters": [dataclasses.asdict(r) for r in result.counters],
    }
