"""The connection matrix in nvidia-smi topo -m's own layout, and a parser for that layout.

Rendering and parsing live together so that a test can hold our matrix against the text
nvidia-smi printed on the same host, cell for cell, affinity columns included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topodoctor.core.cpulist import format_cpulist
from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.topology.graph import connection_matrix, rdma_nics
from topodoctor.topology.hostgraph import HostGraph

LEGEND = """Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks"""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # nvidia-smi underlines the header on a terminal
AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass(frozen=True)
class Matrix:
    """The connection matrix as nvidia-smi topo -m prints it: cells, affinity columns and the NIC legend."""

    names: list[str]  # GPU0.. then NIC0..
    cells: dict[tuple[str, str], str]  # "X", "NV18", "PIX", ...
    affinity: dict[str, tuple[str, str, str]]  # GPU name -> (CPU Affinity, NUMA Affinity, GPU NUMA ID)
    nic_names: dict[str, str]  # NIC0 -> mlx5_0


def _na(value: object) -> str:
    if isinstance(value, (Unsupported, ProbeError)) or value is None:
        return "N/A"
    if isinstance(value, tuple):
        return format_cpulist(value) if value else "N/A"
    return str(value)


def build_matrix(snap: HostSnapshot, g: HostGraph | None = None) -> Matrix:
    """The snapshot's connection matrix, a lost GPU's cells marked ERR."""
    names, conns = connection_matrix(snap, g)
    lost = {f"GPU{gpu.index}" for gpu in snap.gpus if gpu.lost is not None}
    cells = {}
    for (a, b), c in conns.items():
        cells[(a, b)] = "ERR" if (a in lost or b in lost) and a != b else (" X " if c.cls == "X" else c.label)
    affinity = {
        f"GPU{gpu.index}": (_na(gpu.cpu_affinity), _na(gpu.memory_affinity), _na(gpu.numa_node)) for gpu in snap.gpus
    }
    nic_names = {f"NIC{k}": nic.name for k, nic in enumerate(rdma_nics(snap))}
    return Matrix(names, cells, affinity, nic_names)


def render(m: Matrix) -> str:
    """Tab-separated like nvidia-smi topo -m, legend and NIC legend included."""
    lines = ["\t" + "\t".join(m.names) + "\t" + "\t".join(AFFINITY_COLUMNS)]
    for a in m.names:
        row = [m.cells[(a, b)] for b in m.names]
        extra = list(m.affinity.get(a, ("", "", "")))
        if a in m.affinity:
            extra[1] += "\t"  # nvidia-smi pads the NUMA column with a second tab
        lines.append(a + "\t" + "\t".join(row) + ("\t" + "\t".join(extra) if a in m.affinity else ""))
    lines += ["", LEGEND]
    if m.nic_names:
        lines += ["", "NIC Legend:", ""] + [f"  {k}: {v}" for k, v in m.nic_names.items()]
    return "\n".join(lines) + "\n"


def parse_nvidia_smi(text: str) -> Matrix:
    """Read nvidia-smi topo -m output back into cells and affinity columns.

    Raises ValueError when the text is not a topo -m matrix.
    """
    lines = [_ANSI.sub("", ln) for ln in text.splitlines()]
    header_i = next((i for i, ln in enumerate(lines) if ln.startswith("\t") and "GPU0" in ln), None)
    if header_i is None:
        raise ValueError("no topo -m header line (a tab, then GPU0 ...)")
    cols = [c.strip() for c in lines[header_i].split("\t") if c.strip()]
    names = [c for c in cols if c.startswith(("GPU", "NIC")) and c[3:].isdigit()]
    extra = [c for c in cols if c not in names]
    cells: dict[tuple[str, str], str] = {}
    affinity: dict[str, tuple[str, str, str]] = {}
    for ln in lines[header_i + 1 :]:
        if not ln.strip() or ln.startswith("Legend"):
            break
        parts = [p.strip() for p in ln.split("\t")]
        row, values = parts[0], [p for p in parts[1:] if p != ""]
        if row not in names:
            continue
        for b, v in zip(names, values):
            cells[(row, b)] = " X " if v == "X" else v
        rest = values[len(names) :]
        if row.startswith("GPU"):
            got = dict(zip(extra, rest))
            # A column this driver does not print stays "" and is not compared.
            affinity[row] = tuple(got.get(c, "") for c in AFFINITY_COLUMNS)  # type: ignore[assignment]
    nic_names = {}
    for ln in lines:
        s = ln.strip()
        if s.startswith("NIC") and ":" in s and s.split(":")[0][3:].isdigit():
            k, v = s.split(":", 1)
            nic_names[k.strip()] = v.strip()
    return Matrix(names, cells, affinity, nic_names)


def diff(ours: Matrix, theirs: Matrix) -> list[str]:
    """Cells where the two matrices disagree, as readable lines; [] when they agree."""
    out = []
    if ours.names != theirs.names:
        out.append(f"rows differ: ours {ours.names} vs nvidia-smi {theirs.names}")
    for key in sorted(set(ours.cells) | set(theirs.cells)):
        a, b = ours.cells.get(key), theirs.cells.get(key)
        if a != b:
            out.append(f"{key[0]}/{key[1]}: ours {a!r} vs nvidia-smi {b!r}")
    for gpu in sorted(set(ours.affinity) | set(theirs.affinity)):
        a_aff, b_aff = ours.affinity.get(gpu), theirs.affinity.get(gpu)
        if a_aff is None or b_aff is None:
            out.append(f"{gpu} affinity: ours {a_aff} vs nvidia-smi {b_aff}")
            continue
        for col, x, y in zip(AFFINITY_COLUMNS, a_aff, b_aff):
            if x and y and x != y:
                out.append(f"{gpu} {col}: ours {x!r} vs nvidia-smi {y!r}")
    if ours.nic_names != theirs.nic_names and theirs.nic_names:
        out.append(f"NIC legend: ours {ours.nic_names} vs nvidia-smi {theirs.nic_names}")
    return out
