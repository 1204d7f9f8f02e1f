"""A baseline: an earlier snapshot of the same node (``check --baseline FILE``), so that the
PCIe and NIC port counters are judged by their rise since then as well as during the check.

The check's own window is a fraction of a second; a link that errs once a minute shows only
against a baseline. Counters count since the driver loaded (GPU) or since the port's
counters were last reset (NIC), and the narrow ones saturate, so a rise is only taken
within one boot (the kernel's uptime grew) and per counter only when it did not go back
(reset or wrapped): anything else is no evidence either way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topodoctor.core import codec
from topodoctor.model.fitness import NicPort
from topodoctor.model.snapshot import Gpu, HostSnapshot, Nic, snapshot_from_data

if TYPE_CHECKING:
    from topodoctor.core.budget import Budget


@dataclass(frozen=True)
class Since:
    """What counters rose by since the baseline, over how many seconds."""

    rise: dict[str, int]
    window_s: float


def load_baseline(path: Path | str, budget: Budget | None = None) -> HostSnapshot:
    """A snapshot from a file: a snapshot, a `scan --format json` document or a recording."""
    timeout = budget.left() if budget is not None and budget.limited else None
    data: Any = codec.read_json(path, "baseline", timeout)
    if isinstance(data, dict) and data.get("kind") in ("scan", "recording"):
        data = data.get("snapshot")
    return snapshot_from_data(data, f"baseline {path}")


def _window(then: object, now: object) -> float | None:
    if isinstance(then, float) and isinstance(now, float) and now > then:
        return now - then
    return None  # unread, or another boot: the counters started again


def _rises(before: dict[str, object], after: dict[str, object]) -> dict[str, int]:
    out = {}
    for name, a in before.items():
        b = after.get(name)
        if isinstance(a, int) and isinstance(b, int) and b > a:
            out[name] = b - a
    return out


def gpu_pcie_since(base: HostSnapshot | None, g: Gpu) -> Since | None:
    """The GPU's PCIe counters since the baseline's last reading of the same GPU (by UUID)."""
    if base is None or not isinstance(g.uuid, str):
        return None
    old = next((b for b in base.gpus if b.uuid == g.uuid), None)
    if old is None:
        return None
    window = _window(old.fitness.end.at_s, g.fitness.end.at_s)
    if window is None:
        return None
    before = {f.name: getattr(old.fitness.end.pcie, f.name) for f in dataclasses.fields(old.fitness.end.pcie)}
    after = {f.name: getattr(g.fitness.end.pcie, f.name) for f in dataclasses.fields(g.fitness.end.pcie)}
    return Since(_rises(before, after), window)


def port_since(base: HostSnapshot | None, nic: Nic, port: NicPort) -> Since | None:
    """A NIC port's counters since the baseline's last reading of the same device and port."""
    if base is None:
        return None
    old_nic = next((n for n in base.nics if n.name == nic.name), None)
    old = next((p for p in old_nic.ports if p.port == port.port), None) if old_nic is not None else None
    if old is None:
        return None
    window = _window(old.at_end_s, port.at_end_s)
    if window is None:
        return None
    return Since(_rises(dict(old.counters_end), dict(port.counters_end)), window)
