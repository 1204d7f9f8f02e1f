"""`topodoctor scan` output: what its text shows (``scan_text``, drawn by report/scan_text.py)
and a JSON document for machines. Nothing here loads rich: the text scan's probe child sets its
text out with this module, and only the command that draws it loads rich."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from topodoctor.core.codec import to_jsonable
from topodoctor.core.cpulist import format_cpulist
from topodoctor.core.pci import long_bus_id
from topodoctor.core.probed import ProbeError, Unsupported, show
from topodoctor.model.snapshot import Gpu, HostSnapshot, Nic, NvSwitch, nvlink_generation
from topodoctor.topology.graph import connection_matrix, nvlink_link_gbps
from topodoctor.topology.hostgraph import HostGraph
from topodoctor.topology.topo_matrix import build_matrix, render

if TYPE_CHECKING:  # the text scan's child sets the text out without rich (service/probing.py)
    from rich.console import Console

    from topodoctor.report.scan_text import ScanText

SCAN_SCHEMA_VERSION = 1


def _gib(n: object) -> str:
    return f"{n / 2**30:.0f} GiB" if isinstance(n, int) else show(n)


def _onoff(v: object) -> str:
    return ("on" if v else "off") if isinstance(v, bool) else show(v)


def scan_text(snap: HostSnapshot, origin: str, g: HostGraph) -> ScanText:
    """What the text scan shows, cell by cell (report/scan_text.py draws it)."""
    return {
        "host_title": f"Host ({origin})",
        "host_rows": _host_rows(snap),
        "gpu_rows": [_gpu_cells(gpu) for gpu in snap.gpus],
        "gpu_lost": [gpu.lost is not None for gpu in snap.gpus],
        "matrix": render(build_matrix(snap, g)),
        "nvlink_rows": _nvlink_rows(snap) if any(gpu.nvlinks for gpu in snap.gpus) else [],
        "nvswitch_lines": [_nvswitch_line(sw) for sw in snap.nvswitches],
        "nic_rows": [_nic_row(n) for n in snap.nics],
        "probe_errors": [f"{e.call}: {e.error}" for e in snap.probe_errors],
    }


def print_scan(snap: HostSnapshot, origin: str, g: HostGraph, console: Console) -> None:
    """The scan as text (``scan_text``, drawn)."""
    from topodoctor.report.scan_text import print_scan_text  # rich: only the text is drawn with it

    print_scan_text(scan_text(snap, origin, g), console)


def _host_rows(snap: HostSnapshot) -> list[list[str]]:
    h = snap.host
    numa = ", ".join(f"node{n.id}: cpus {_cpus(n.cpus)}" for n in h.numa_nodes) or "none reported"
    return [
        ["hostname", h.hostname],
        ["kernel", show(h.kernel)],
        ["virtualization", f"{h.virtualization} ({h.virtualization_detail})"],
        ["driver / CUDA / NVML", f"{show(h.driver_version)} / {show(h.cuda_driver_version)} / {show(h.nvml_version)}"],
        ["CPU", f"{show(h.cpu_model)}, sockets: {show(h.sockets)}"],
        ["NUMA", numa],
        ["IOMMU", show(h.iommu)],
    ]


def _cpus(cpus: tuple[int, ...]) -> str:

    return format_cpulist(cpus) or "-"


def _bus(bus_id: object) -> str:
    """A GPU's bus id as nvidia-smi prints it (``00000000:18:00.0``), or why it is not known."""
    return long_bus_id(bus_id) if isinstance(bus_id, str) else show(bus_id)


def _gpu_cells(g: Gpu) -> list[str]:
    if g.lost is not None:
        return [str(g.index), f"LOST: {g.lost.error}", _bus(g.bus_id), *[""] * 9]
    p = g.pcie
    active = sum(1 for link in g.nvlinks if link.is_up is True)
    fabric = g.fabric.state if not isinstance(g.fabric, (Unsupported, ProbeError)) else show(g.fabric)
    return [
        str(g.index),
        show(g.name),
        _bus(g.bus_id),
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


def _nvlink_rows(snap: HostSnapshot) -> list[list[str]]:
    rows = []
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

        rows.append(
            [
                str(g.index),
                f"{len(active)}/{len(g.nvlinks)}",
                ",".join(str(x) for x in sorted(v for v in gens if v is not None)) or "-",
                ",".join(remotes) or "-",
                f"{rate:g}" if rate else "-",
                f"{rate * len(active):.1f}" if rate else "-",
                total("replay"),
                total("recovery"),
                total("crc"),
            ]
        )
    return rows


def _nvswitch_line(sw: NvSwitch) -> str:
    seen = "inferred: links point at switches this host cannot see" if sw.inferred else show(sw.bus_id)
    return f"NVSwitch {sw.id}: {len(sw.gpu_links)} GPU links ({seen})"


def _nic_row(n: Nic) -> list[str]:
    rate = show(n.rate_gbps, "{:g}")
    return [n.name, n.kind, show(n.bus_id), show(n.numa_node), show(n.state), rate, ",".join(n.netdevs) or "-"]


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
