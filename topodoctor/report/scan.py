"""`topodoctor scan` output: readable tables (rich) and a JSON document for machines."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from topodoctor.core.codec import to_jsonable
from topodoctor.core.probed import ProbeError, Unsupported, show
from topodoctor.core.text import printable
from topodoctor.model.snapshot import Gpu, HostSnapshot, nvlink_generation
from topodoctor.report.terminal import literal
from topodoctor.topology.graph import connection_matrix, nvlink_link_gbps
from topodoctor.topology.hostgraph import HostGraph
from topodoctor.topology.topo_matrix import build_matrix, render

SCAN_SCHEMA_VERSION = 1


def _gib(n: object) -> str:
    return f"{n / 2**30:.0f} GiB" if isinstance(n, int) else show(n)


def _onoff(v: object) -> str:
    return ("on" if v else "off") if isinstance(v, bool) else show(v)


def _host_table(snap: HostSnapshot, origin: str) -> Table:
    h = snap.host
    t = Table(title=printable(f"Host ({origin})"), show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    numa = ", ".join(f"node{n.id}: cpus {_cpus(n.cpus)}" for n in h.numa_nodes) or "none reported"
    rows = [
        ("hostname", h.hostname),
        ("kernel", show(h.kernel)),
        ("virtualization", f"{h.virtualization} ({h.virtualization_detail})"),
        ("driver / CUDA / NVML", f"{show(h.driver_version)} / {show(h.cuda_driver_version)} / {show(h.nvml_version)}"),
        ("CPU", f"{show(h.cpu_model)}, sockets: {show(h.sockets)}"),
        ("NUMA", numa),
        ("IOMMU", show(h.iommu)),
    ]
    for k, v in rows:
        t.add_row(k, printable(v))
    return t


def _cpus(cpus: tuple[int, ...]) -> str:
    from topodoctor.core.cpulist import format_cpulist

    return format_cpulist(cpus) or "-"


_GPU_COLUMNS = ("GPU", "name", "bus id", "arch / cc", "memory", "NUMA")
_STATE_COLUMNS = ("PCIe now/max", "NVLinks", "persist", "MIG", "ECC", "fabric")
WIDE = 130  # below this the GPU table is printed as two, so no cell is folded letter by letter


def _gpu_cells(g: Gpu) -> list[str]:
    if g.lost is not None:
        return [str(g.index), f"LOST: {g.lost.error}", show(g.bus_id), *[""] * 9]
    p = g.pcie
    active = sum(1 for link in g.nvlinks if link.is_up is True)
    fabric = g.fabric.state if not isinstance(g.fabric, (Unsupported, ProbeError)) else show(g.fabric)
    return [
        str(g.index),
        show(g.name),
        show(g.bus_id),
        f"{show(g.architecture)} / {show(g.compute_capability)}",
        _gib(g.memory_total_bytes),
        show(g.sysfs_numa_node),
        f"Gen{show(p.gen_current)} x{show(p.width_current)} / Gen{show(p.gen_max)} x{show(p.width_max)}",
        f"{active}/{show(g.nvlink_count)}",
        _onoff(g.persistence_mode),
        _onoff(g.mig_mode),
        _onoff(g.ecc_mode),
        fabric,
    ]


def _gpu_tables(snap: HostSnapshot, width: int) -> list[Table]:
    """One table on a wide terminal; on a narrow one, identity and state apart (GPU in both)."""
    columns = [*_GPU_COLUMNS, *_STATE_COLUMNS]
    parts = [columns] if width >= WIDE else [list(_GPU_COLUMNS), ["GPU", *_STATE_COLUMNS]]
    tables = []
    for n, part in enumerate(parts):
        t = Table(title="GPUs" if n == 0 else "GPU state")
        for col in part:
            t.add_column(col, no_wrap=col in ("GPU", "bus id"), overflow="fold")
        for g in snap.gpus:
            cells = dict(zip(columns, _gpu_cells(g)))
            style = "red" if g.lost is not None else ""
            t.add_row(*(literal(cells[c], style if c == "name" else "") for c in part))
        tables.append(t)
    return tables


def _nvlink_table(snap: HostSnapshot) -> Table:
    t = Table(title="NVLink")
    for col in ("GPU", "active", "NVLink", "remote", "per link GB/s", "total GB/s", "replay", "recovery", "CRC"):
        t.add_column(col, overflow="fold")
    for g in snap.gpus:
        if not g.nvlinks:
            continue
        active = [link for link in g.nvlinks if link.is_up is True]
        gens = {nvlink_generation(link.version) for link in active if isinstance(link.version, int)}
        remotes = sorted({str(link.remote_type) for link in active})
        rate = nvlink_link_gbps(g)

        def total(name: str, links: Any = g.nvlinks) -> str:
            vals = [getattr(link.errors, name) for link in links]
            nums = [v for v in vals if isinstance(v, int)]
            return str(sum(nums)) if nums else show(vals[0]) if vals else "-"

        _row(
            t,
            str(g.index),
            f"{len(active)}/{len(g.nvlinks)}",
            ",".join(str(x) for x in sorted(v for v in gens if v is not None)) or "-",
            ",".join(remotes) or "-",
            f"{rate:g}" if rate else "-",
            f"{rate * len(active):.1f}" if rate else "-",
            total("replay"),
            total("recovery"),
            total("crc"),
        )
    return t


def _nic_table(snap: HostSnapshot) -> Table:
    t = Table(title="NICs")
    for col in ("name", "kind", "bus id", "NUMA", "state", "rate Gb/s", "net devices"):
        t.add_column(col, no_wrap=col == "bus id", overflow="fold")
    for n in snap.nics:
        _row(
            t,
            n.name,
            n.kind,
            show(n.bus_id),
            show(n.numa_node),
            show(n.state),
            show(n.rate_gbps, "{:g}"),
            ",".join(n.netdevs) or "-",
        )
    return t


def _row(t: Table, *cells: str) -> None:
    t.add_row(*(printable(c) for c in cells))


def print_scan(snap: HostSnapshot, origin: str, g: HostGraph, console: Console) -> None:
    """The scan as text: the host, the GPUs, the connection matrix as nvidia-smi topo -m prints it,
    then NVLinks, NVSwitches, NICs and what the probe could not read."""
    console.print(_host_table(snap, origin))
    console.print()
    for table in _gpu_tables(snap, console.width):
        console.print(table)
    console.print()
    console.print(Text.assemble(("Connection matrix", "bold"), " (as nvidia-smi topo -m)"))
    console.out("\n".join(printable(line) for line in render(build_matrix(snap, g)).splitlines()))
    if any(g.nvlinks for g in snap.gpus):
        console.print(_nvlink_table(snap))
    if snap.nvswitches:
        for sw in snap.nvswitches:
            seen = "inferred: links point at switches this host cannot see" if sw.inferred else show(sw.bus_id)
            console.print(literal(f"NVSwitch {sw.id}: {len(sw.gpu_links)} GPU links ({seen})"))
    console.print(_nic_table(snap) if snap.nics else "NICs: none found")
    if snap.probe_errors:
        console.print(Text("Probe errors", style="bold red"))
        for e in snap.probe_errors:
            console.print(literal(f"  {e.call}: {e.error}"))


def scan_json(snap: HostSnapshot, origin: str, g: HostGraph) -> dict[str, Any]:
    """The scan as ``--format json`` prints it: the snapshot and the topology (matrix, nominal rates,
    affinity)."""
    names, conns = connection_matrix(snap, g)
    m = build_matrix(snap, g)
    return {
        "kind": "scan",
        "schema_version": SCAN_SCHEMA_VERSION,
        "origin": origin,
        "snapshot": to_jsonable(snap),
        "topology": {
            "names": names,
            "matrix": {a: {b: m.cells[(a, b)].strip() for b in names} for a in names},
            "nominal_gbps": {a: {b: conns[(a, b)].gbps for b in names} for a in names},
            "affinity": {gpu: dict(zip(("cpu", "numa", "gpu_numa_id"), v)) for gpu, v in m.affinity.items()},
            "nics": m.nic_names,
        },
    }
