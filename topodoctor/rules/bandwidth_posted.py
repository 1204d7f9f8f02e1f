"""Copy matrices another tool printed (p2pBandwidthLatencyTest, nvbandwidth; read by evidence/) as a
bandwidth result, so that the copy rules (TD7xx) and the cause engine judge a posted matrix as they
judge topodoctor's own copies, against the host it was measured on.

Each figure keeps its direction as the tool's source says it moved the data: p2pBandwidthLatencyTest's
P2P writes copy from the row's GPU to the column's (``performP2PCopy(buffers[j], j, buffers[i], i)``),
its reads and nvbandwidth's ``*_read_*`` testcases pull the column's data into the row's GPU,
nvbandwidth's writes push the row's into the column's. Only what topodoctor's own modes mean is taken:
one-way device copies with peer access (the copy engine's, or the SM's), host-to-device and
device-to-host copies. A P2P=Disabled matrix (the same copies staged through host memory) is kept
beside them, as what TD702 weighs a peer copy against. A bidirectional figure is left out (the tools
print the sum of both directions or one of them, topodoctor's ``bidir`` each direction as measured at
once), and so is latency.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from topodoctor.core.pci import short_bus_id
from topodoctor.core.probed import Unsupported
from topodoctor.model.copies import (
    BANDWIDTH_SCHEMA_VERSION,
    BandwidthResult,
    GpuIdentity,
    Measurement,
    Mode,
    Path_,
    Stats,
)
from topodoctor.model.evidence import CopyMatrix, Evidence
from topodoctor.model.snapshot import HostSnapshot

TOOLS = {"p2pBandwidthLatencyTest", "nvbandwidth"}
STAGED_KEY = "staged_oneway_gbps"  # settings: [[src, dst, GB/s], ...] of a posted P2P=Disabled matrix


@dataclass(frozen=True)
class Posted:
    """A posted matrix judged as a result, or why it cannot be (one line)."""

    result: BandwidthResult | None
    why_not: str = ""
    left_out: tuple[str, ...] = ()  # the matrices read but not judged, each with why


def _mode(m: CopyMatrix) -> tuple[Mode, Path_] | None:
    """topodoctor's mode for a matrix, or None where it has none."""
    if m.unit != "GB/s" or m.direction != "unidirectional":
        return None
    t = m.testcase
    if m.tool == "p2pBandwidthLatencyTest":
        return ("oneway", "p2p") if m.p2p is True else None
    if t == "host_to_device_memcpy_ce":
        return "h2d", "host"
    if t == "device_to_host_memcpy_ce":
        return "d2h", "host"
    if t.startswith("device_to_device_memcpy_") and t.endswith("_ce"):
        return "oneway", "p2p"
    if t.startswith("device_to_device_memcpy_") and t.endswith("_sm"):
        return "sm_oneway", "p2p"
    return None


def _why_left_out(m: CopyMatrix) -> str:
    if m.unit != "GB/s":
        return f"{m.testcase}: latency (TD7xx judge bandwidth)"
    if m.direction == "bidirectional":
        return f"{m.testcase}: bidirectional (the tools count both directions their own way)"
    if m.p2p is False:
        return f"{m.testcase}: staged through host memory, not a mode topodoctor measures"
    return f"{m.testcase}: not a copy topodoctor measures"


def _staged(m: CopyMatrix) -> bool:
    """p2pBandwidthLatencyTest's one-way copies with peer access off: staged through host memory."""
    return (
        m.tool == "p2pBandwidthLatencyTest" and m.unit == "GB/s" and m.direction == "unidirectional" and m.p2p is False
    )


def _cells(m: CopyMatrix) -> list[tuple[str, str, float]]:
    """(source label, destination label, GB/s) of every figure the matrix printed, row to column."""
    return [
        (row, col, v)
        for i, row in enumerate(m.rows)
        for j, col in enumerate(m.columns)
        if i < len(m.values) and j < len(m.values[i]) and (v := m.values[i][j]) is not None and v > 0
    ]


def _pulls(m: CopyMatrix) -> bool:
    """Whether the row's GPU reads the column's data (the copy goes column -> row)."""
    return "read" in m.testcase


def device_map(ev: Evidence, piece: int, snap: HostSnapshot) -> dict[str, int] | str:
    """The tool's device labels ("0", "1") -> NVML indices of ``snap``: by the bus ids the tool
    printed, else by PCI order (CUDA numbers identical GPUs in PCI order, as NVML does); a line
    saying why where neither fits."""
    by_bus = {short_bus_id(g.bus_id): g.index for g in snap.gpus if isinstance(g.bus_id, str)}
    seen = [g for g in ev.gpus if g.piece == piece and g.ordinal_kind == "cuda"]
    if seen and all(g.bus_id for g in seen):
        got = {str(g.index): by_bus.get(short_bus_id(g.bus_id)) for g in seen}
        missing = sorted(k for k, v in got.items() if v is None)
        if missing:
            bus = ", ".join(next(g.bus_id for g in seen if str(g.index) == k) for k in missing)
            return f"the matrix's GPUs {', '.join(missing)} (bus {bus}) are not GPUs of the host given"
        return {k: v for k, v in got.items() if v is not None}
    order = [i for _, i in sorted(by_bus.items())]
    return {str(k): i for k, i in enumerate(order)}


def posted_result(ev: Evidence, snap: HostSnapshot, source: str) -> Posted:
    """The copy matrices of ``ev`` as one bandwidth result on ``snap`` (``source`` names the file)."""
    mats = [m for m in ev.copies if m.tool in TOOLS]
    if not mats:
        return Posted(None, f"{source}: no copy matrix of p2pBandwidthLatencyTest or nvbandwidth")
    taken: dict[tuple[Mode, int, int], Measurement] = {}
    staged: list[list[float]] = []
    left: list[str] = []
    tools: list[str] = []
    for m in mats:
        how = _mode(m)
        if how is None and not _staged(m):
            left.append(_why_left_out(m))
            continue
        gpus = device_map(ev, m.piece, snap)
        if isinstance(gpus, str):
            return Posted(None, f"{source}: {gpus}")
        beyond = sorted({x for x in (*m.rows, *m.columns) if x.isdigit()} - gpus.keys(), key=int)
        if beyond:  # judged on the GPUs it shares with the host, the rest of the matrix would pass unsaid
            shown = ", ".join(beyond[:3]) + (f" and {len(beyond) - 3} more" if len(beyond) > 3 else "")
            return Posted(None, f"{source}: the matrix names GPUs {shown}; the host given has {len(gpus)} GPUs")
        if how is None:  # P2P=Disabled: the same copies staged through host memory, what TD702 weighs P2P by
            staged += [[gpus[r], gpus[c], v] for r, c, v in _cells(m) if r in gpus and c in gpus and r != c]
            continue
        mode, path = how
        for i, row in enumerate(m.rows):
            for j, col in enumerate(m.columns):
                v = m.values[i][j] if i < len(m.values) and j < len(m.values[i]) else None
                a, b = (col, row) if _pulls(m) and mode not in ("h2d", "d2h") else (row, col)
                if mode == "d2h":  # nvbandwidth prints CPU(row) <- GPU(column)
                    a, b = col, "host"
                src, dst = gpus.get(a, -1 if a == "host" else None), gpus.get(b, -1 if b == "host" else None)
                if v is None or v <= 0 or src is None or dst is None or src == dst:
                    continue
                key = (mode, src, dst)
                if key not in taken:  # the first matrix of a mode wins (nvbandwidth's read before its write)
                    taken[key] = Measurement(mode, src, dst, 0, Stats(v, v, v, (v,)), path, None, None, None)
        tools.append(m.tool)
    if not taken:
        return Posted(None, f"{source}: none of its matrices is a copy the bandwidth rules judge", tuple(left))
    # the processes the host's snapshot lists were on its GPUs when it was probed, not when the tool ran
    unknown = Unsupported("not known when the posted tool ran")
    snap = replace(snap, gpus=tuple(replace(g, compute_processes=unknown) for g in snap.gpus))
    used = {i for _, a, b in taken for i in (a, b) if i >= 0}
    ids = tuple(
        GpuIdentity(
            g.index, k, g.bus_id if isinstance(g.bus_id, str) else "", g.name if isinstance(g.name, str) else ""
        )
        for k, g in enumerate(sorted((g for g in snap.gpus if g.index in used), key=lambda g: g.index))
    )
    result = BandwidthResult(
        "bandwidth",
        BANDWIDTH_SCHEMA_VERSION,
        snap.host.hostname,
        "",
        "",
        f"{' and '.join(dict.fromkeys(tools))} (posted: {source})",
        ids,
        (),
        tuple(taken.values()),
        0.0,
        {"posted": source, "left_out": left, STAGED_KEY: staged},
        snap,
    )
    return Posted(result, left_out=tuple(left))
