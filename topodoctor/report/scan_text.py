"""The text scan drawn with rich from its plain document (``ScanText``, made by report/scan.py).

The document is what every cell says, computed where the snapshot is; this module only lays it
out, so it loads rich and nothing of the model or the topology. A plain ``topodoctor scan`` has
its probe child compute the document and the command draw it: the command then loads rich while
the child probes, and neither loads what the other does (docs/architecture.md, start-up)."""

from __future__ import annotations

from typing import TypedDict

from rich.console import Console
from rich.table import Table
from rich.text import Text

from topodoctor.core.text import printable
from topodoctor.report.terminal import fold, literal

AFFINITY = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")  # topology/topo_matrix.py's columns after the matrix


class ScanText(TypedDict):
    """What the text scan shows, cell by cell, as plain JSON data. Strings are as the host gave
    them: the drawing escapes them (``printable``)."""

    host_title: str
    host_rows: list[list[str]]  # label, value
    gpu_rows: list[list[str]]  # one cell per GPU_COLUMNS + STATE_COLUMNS
    gpu_lost: list[bool]  # per row: a GPU lost shows its name in red
    matrix: str  # the connection matrix, as nvidia-smi topo -m prints it
    nvlink_rows: list[list[str]]  # one per GPU with links, NVLINK_COLUMNS; none: no table
    nvswitch_lines: list[str]
    nic_rows: list[list[str]]  # NIC_COLUMNS; none: "NICs: none found"
    probe_errors: list[str]


GPU_COLUMNS = ("GPU", "name", "bus id", "arch / cc", "memory", "NUMA")
STATE_COLUMNS = ("PCIe now/max", "NVLinks", "persist", "MIG", "ECC", "fabric")
NVLINK_COLUMNS = ("GPU", "active", "NVLink", "remote", "per link GB/s", "total GB/s", "replay", "recovery", "CRC")
NIC_COLUMNS = ("name", "kind", "bus id", "NUMA", "state", "rate Gb/s", "net devices")
WIDE = 130  # below this the GPU table is printed as two, so no cell is folded letter by letter


def print_scan_text(doc: ScanText, console: Console) -> None:
    """The scan as text: the host, the GPUs, the connection matrix as nvidia-smi topo -m prints it,
    then NVLinks, NVSwitches, NICs and what the probe could not read."""
    console.print(_host_table(doc))
    console.print()
    for table in _gpu_tables(doc, console.width):
        console.print(table)
    console.print()
    console.print(Text.assemble(("Connection matrix", "bold"), " (as nvidia-smi topo -m)"))
    console.out("\n".join(printable(line) for line in matrix_lines(doc["matrix"], console.width)))
    if doc["nvlink_rows"]:
        console.print(_table("NVLink", NVLINK_COLUMNS, doc["nvlink_rows"]))
    for line in doc["nvswitch_lines"]:
        console.print(literal(line))
    console.print(_table("NICs", NIC_COLUMNS, doc["nic_rows"], ("bus id",)) if doc["nic_rows"] else "NICs: none found")
    if doc["probe_errors"]:
        console.print(Text("Probe errors", style="bold red"))
        for line in doc["probe_errors"]:
            console.print(literal(f"  {line}"))


def matrix_lines(matrix: str, width: int) -> list[str]:
    """nvidia-smi topo -m's text as it prints it (tab-separated) where it fits ``width``; on a
    narrower terminal the same cells in columns as wide as they need, the affinity columns
    in a block of their own below, and the legend folded."""
    lines = matrix.splitlines()
    if max((len(line.expandtabs()) for line in lines), default=0) <= width:
        return lines
    end = lines.index("") if "" in lines else len(lines)
    rows = [line.split("\t") for line in lines[:end]]
    names = rows[0][1:]
    gpus = [r for r in rows[1:] if r[0].startswith("GPU")]
    n = sum(1 for x in names if x not in AFFINITY)  # the matrix's own columns, then the affinity ones
    cell = max(len(c.strip()) for r in rows for c in r[: n + 1]) + 1
    out = [
        "".join(c.strip().center(cell) if i else c.ljust(cell) for i, c in enumerate(r[: n + 1])).rstrip() for r in rows
    ]
    if gpus and len(rows[0]) > n + 1:
        affinity = [x for x in names[n:] if x]
        out += ["", "".join(x.ljust(16) for x in ["", *affinity]).rstrip()]
        for r in gpus:
            out.append("".join(x.ljust(16) for x in [r[0], *[c for c in r[n + 1 :] if c]]).rstrip())
    for line in lines[end:]:
        out += fold(line, width, 9 if line.startswith("  ") and "=" in line else None)
    return out


def _host_table(doc: ScanText) -> Table:
    t = Table(title=printable(doc["host_title"]), show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for label, value in doc["host_rows"]:
        t.add_row(label, printable(value))
    return t


def _gpu_tables(doc: ScanText, width: int) -> list[Table]:
    """One table on a wide terminal; on a narrow one, identity and state apart (GPU in both)."""
    columns = [*GPU_COLUMNS, *STATE_COLUMNS]
    parts = [columns] if width >= WIDE else [list(GPU_COLUMNS), ["GPU", *STATE_COLUMNS]]
    tables = []
    for n, part in enumerate(parts):
        t = Table(title="GPUs" if n == 0 else "GPU state")
        for col in part:
            t.add_column(col, no_wrap=col in ("GPU", "bus id"), overflow="fold")
        for row, lost in zip(doc["gpu_rows"], doc["gpu_lost"], strict=True):
            cells = dict(zip(columns, row, strict=True))
            style = "red" if lost else ""
            t.add_row(*(literal(cells[c], style if c == "name" else "") for c in part))
        tables.append(t)
    return tables


def _table(title: str, columns: tuple[str, ...], rows: list[list[str]], no_wrap: tuple[str, ...] = ()) -> Table:
    t = Table(title=title)
    for col in columns:
        t.add_column(col, no_wrap=col in no_wrap, overflow="fold")
    for row in rows:
        t.add_row(*(printable(c) for c in row))
    return t
