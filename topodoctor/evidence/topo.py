"""``nvidia-smi topo -m`` (the connection matrix) and ``nvidia-smi topo -p2p r|w|n|a|p`` (peer
access per pair), as pasted: with tabs or with the spaces a paste turned them into, ANSI escapes
gone (``lines.clean``), rows a narrow terminal wrapped, and old drivers' layouts (``SOC`` for
``SYS``, NICs named by their device in the header, no NUMA columns).

    \tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
    GPU0\t X \tNV18\tPIX\t0-63\t0\t\tN/A
    NIC0\tPIX\t...
    Legend: ...
    NIC Legend:
      NIC0: mlx5_0
"""

from __future__ import annotations

import re

from topodoctor.core.errors import InputError
from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.evidence import GpuSeen, Kind, NicSeen, PairSeen

MAX_DEVICES = 1024  # GPUs and NICs of one host's matrix; its pairs grow as the square
_DEVICE = re.compile(r"^(?:GPU\d+|NIC\d+|mlx\d+_\d+|mlx5_\w+|ib\w+|hfi\d+_\d+|bnxt_re\d+|eth\d+|efa_\d+)$")
_LINK = re.compile(r"^(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|ERR|N/A)$")
_P2P = re.compile(r"^(?:X|OK|CNS|GNS|TNS|NS|DR|U)$")
_CELL = re.compile(
    r"^(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|ERR|N/A|OK|CNS|GNS|TNS|NS|DR|U|[\d,-]+)$"
)  # a wrapped row's rest
_EXTRA = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)")
_P2P_MODE = re.compile(r"topo\s+-p2p\s*([rwnap]+)\b")
_LEGEND_LINE = re.compile(r"^\s*(?:Legend:|NIC Legend:|[A-Z#]{1,5}\s+= )")


def _header(line: str) -> tuple[list[str], list[str]] | None:
    """(device columns, extra columns) of a header line, or None when it is not one. The header may
    stand on the command's own line, where a paste lost the newline after the prompt."""
    tokens = line.split()
    if "GPU0" in tokens[1:] and "topo" in tokens[: tokens.index("GPU0")]:
        tokens = tokens[tokens.index("GPU0") :]
    if not tokens or tokens[0] != "GPU0":
        return None
    devices: list[str] = []
    for t in tokens:
        if not _DEVICE.match(t):
            break
        devices.append(t)
    rest = " ".join(tokens[len(devices) :])
    extra = [name for name in _EXTRA if name in rest]
    return devices, extra


def starts(lines: list[str], i: int) -> bool:
    """Whether a topo -m or topo -p2p matrix begins at line ``i`` (its header, then a GPU0 row)."""
    got = _header(lines[i])
    return bool(got and len(got[0]) >= 1 and i + 1 < len(lines) and lines[i + 1].split()[:1] == ["GPU0"])


def read(lines: list[str], i: int, piece: int) -> Block:
    """The matrix from its header at line ``i``, through its legends."""
    got = _header(lines[i])
    assert got is not None  # starts() said so
    devices, extra = got
    if len(devices) > MAX_DEVICES:
        raise InputError(
            f"a topo matrix of {len(devices)} devices at line {i + 1}: more than a host has ({MAX_DEVICES})"
        )
    rows: dict[str, list[str]] = {}
    j = i + 1
    cut = ""
    while j < len(lines):
        tokens = lines[j].split()
        if not tokens or tokens[0] not in devices:
            break
        name, values = tokens[0], tokens[1:]
        # a row a narrow terminal wrapped: its cells go on on the next line, which names no device
        need = len(devices) + (len(extra) if name.startswith("GPU") else 0)
        while len(values) < need and j + 1 < len(lines):
            more = lines[j + 1].split()
            if not more or more[0] in devices or not all(_CELL.match(c) for c in more):
                break
            values += more
            j += 1
        rows[name] = values
        j += 1
    # a row that ends before its last column (or, for a GPU, before its affinity columns) is cut, and
    # so may be its last cell ("SY", "NV1" of NV12, "240-25"): that cell is not read
    short = [
        name
        for name, v in rows.items()
        if len(v) < len(devices) or (name.startswith("GPU") and len(v) < len(devices) + len(extra))
    ]
    for name in short:
        rows[name] = rows[name][:-1]
    matrix = [v[: len(devices)] for v in rows.values()]
    p2p = any(_P2P.match(c) and c != "X" for v in matrix for c in v) and not any(
        c != "X" and _LINK.match(c) for v in matrix for c in v
    )
    kind: Kind = "topo-p2p" if p2p else "topo-matrix"
    # old drivers name NICs by device in the header (mlx5_0) and print no row for them
    named = [d for d in devices if not d.startswith(("GPU", "NIC"))]
    expected = [d for d in devices if p2p or d not in named or any(n in rows for n in named)]
    missing = [d for d in expected if d not in rows]
    if missing:
        shown = ", ".join(missing) if len(missing) <= 3 else f"{missing[0]} and {len(missing) - 1} more"
        cut = f"no row for {shown} (the paste ends after {len(rows)} of {len(expected)} rows)"
    if short:
        cut = "; ".join(x for x in (cut, f"the row of {', '.join(short)} is cut") if x)
    # the legends
    nic_names: dict[str, str] = {}
    while j < len(lines):
        line = lines[j]
        if m := _NIC_LEGEND.match(line):
            nic_names[m.group(1)] = m.group(2)
        elif line.strip() and not _LEGEND_LINE.match(line):
            break
        j += 1
    mode = "?"
    for back in range(max(0, i - 4), i + 1):
        if m := _P2P_MODE.search(lines[back]):
            mode = m.group(1)
    parts = Parts()
    for name, values in rows.items():
        for b, cell in zip(devices, values):
            if b == name or not (_P2P if p2p else _LINK).match(cell):
                continue
            if p2p:
                parts.pairs.append(PairSeen(piece, name, b, p2p={mode: cell}))
            else:
                parts.pairs.append(PairSeen(piece, name, b, link="SYS" if cell == "SOC" else cell))
        if name.startswith("GPU") and not p2p:
            got_extra = dict(zip(extra, values[len(devices) :]))
            parts.gpus.append(
                GpuSeen(
                    piece,
                    int(name[3:]),
                    cpu_affinity=_shown(got_extra.get("CPU Affinity", "")),
                    numa_affinity=_shown(got_extra.get("NUMA Affinity", "")),
                )
            )
    for d in devices:
        if d.startswith("GPU"):
            continue
        if d in nic_names:
            parts.nics.append(NicSeen(piece, nic_names[d], alias=d))
        elif not d.startswith("NIC"):
            parts.nics.append(NicSeen(piece, d))  # an old driver names the NIC in the header
        else:
            parts.nics.append(NicSeen(piece, d, alias=d))
    return Block(kind, i, j, parts, cut=cut)


def _shown(cell: str) -> str:
    return "" if cell in ("", "N/A") else cell
