"""Copy matrices: cuda-samples' p2pBandwidthLatencyTest and nvbandwidth (its text and its ``-j``
JSON), every matrix they print, as ``CopyMatrix`` (GB/s, or microseconds for latency; nvbandwidth's
nanoseconds are converted).

p2pBandwidthLatencyTest (cuda-samples, Samples/5_Domain_Specific/p2pBandwidthLatencyTest)::

    [P2P (Peer-to-Peer) GPU Bandwidth Latency Test]
    Device: 0, NVIDIA H200, pciBusID: 0, pciDeviceID: 6, pciDomainID:0
    P2P Connectivity Matrix / Unidirectional P2P=Disabled Bandwidth Matrix (GB/s) / ...
       D\\D     0      1          (GPU / CPU for the latency matrices)
         0 3941.97  37.59

nvbandwidth (output.cpp, testcases_*.cpp)::

    nvbandwidth Version: v0.8
    Running device_to_device_memcpy_read_ce.
    memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
               0         1
     0       N/A    393.98
    SUM device_to_device_memcpy_read_ce 4728.40
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Literal

from topodoctor.evidence.lines import Block, Parts, number
from topodoctor.model.evidence import CopyMatrix, GpuSeen, PairSeen

P2P_TITLE = "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]"
_P2P_DEVICE = re.compile(r"^Device: (\d+), (.+?), pciBusID: (\w+), pciDeviceID: (\w+), pciDomainID:\s*(\w+)")
_CAN_ACCESS = re.compile(r"^Device=(\d+) (CAN|CANNOT) Access Peer Device=(\d+)")
_P2P_HEADING = re.compile(
    r"^(?:(Unidirectional|Bidirectional) )?P2P=(Disabled|Enabled) (?:Bandwidth|Latency)\b.*Matrix \((GB/s|us)\)"
)
_HEADER = re.compile(r"^\s*(?:(?:D\\D|GPU|CPU)\s+)?\d+(?:\s+\d+)*\s*$")
_ROW = re.compile(r"^\s*(\d+)\s+(.*)$")
_PART_FIGURE = re.compile(r"^\d+(?:\.\d?)?$")  # both tools print two decimals: fewer is a number the paste cut
_NVB_VERSION = re.compile(r"^nvbandwidth Version: (\S+)")
_NVB_DEVICE = re.compile(r"^Device (\d+): (.+?)(?: \(([0-9a-fA-F]{8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\))?\s*$")
_NVB_PREAMBLE = re.compile(r"^(?:Built from|NOTE|Additional|Performance can|MPI version|Process |CUDA |\.\.\.|\S+\s*$)")
# the -j document's "0: NVIDIA H200 (00000000:00:06): (vm)"
_NVB_JSON_DEVICE = re.compile(
    r"^(\d+): (.+?)(?: \(([0-9a-fA-F]{8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\))?(:\s*\((.*)\))?\s*$"
)
_NVB_RUNNING = re.compile(r"^Running (\w+)\.")
_NVB_DESCRIPTION = re.compile(r"^(.*\((?:GB/s|ns)\))\s*$")
_NVB_SUM = re.compile(r"^SUM (\w+) ([\d.]+)")
_NVB_WAIVED = re.compile(r"^Waiving (\w+)\.")  # v0.2..0.6; later versions print "Waived:" after Running
# testcase.h: the testcases whose filter() is filterHasAccessiblePeerPairs(): nvbandwidth waives them when
# no GPU can access any other (cuDeviceCanAccessPeer), so a waived one says no pair has peer access
PEER_TESTCASES = ("device_to_device_", "all_to_one_", "one_to_all_")
_DRIVER = re.compile(r"^Driver Version: (\S+)")
_CUDA = re.compile(r"^CUDA Runtime Version: (\d+)")


def _matrix(lines: list[str], j: int) -> tuple[list[str], list[str], list[list[float | None]], int]:
    """(row labels, column labels, values, next line) of the matrix whose column header is line ``j``;
    a row the paste cut short ends in None."""
    cols = [t for t in lines[j].split() if t.isdigit()]
    rows: list[str] = []
    values: list[list[float | None]] = []
    j += 1
    while j < len(lines) and (m := _ROW.match(lines[j])):
        cells = m.group(2).split()
        if len(cells) < len(cols) and j + 1 < len(lines) and not _ROW.match(lines[j + 1]) and lines[j + 1].strip():
            cells += lines[j + 1].split()  # a wrapped row
            j += 1
        rows.append(m.group(1))
        if cells and _PART_FIGURE.match(cells[-1]):
            cells = cells[:-1]
        values.append([number(c) for c in cells[: len(cols)]] + [None] * max(0, len(cols) - len(cells)))
        j += 1
    return rows, cols, values, j


def starts_p2p(lines: list[str], i: int) -> bool:
    """Whether p2pBandwidthLatencyTest's output begins at line ``i``."""
    line = lines[i]
    return line.strip() == P2P_TITLE or line.startswith("P2P Connectivity Matrix") or bool(_P2P_HEADING.match(line))


def read_p2p(lines: list[str], i: int, piece: int) -> Block:
    """Every matrix p2pBandwidthLatencyTest printed, from line ``i``."""
    parts = Parts()
    j = i + 1 if lines[i].strip() == P2P_TITLE else i
    heading: tuple[str, bool, str] | None = None
    cut_start = "" if lines[i].strip() == P2P_TITLE else "the paste starts after the tool's first lines"
    seen = 0
    while j < len(lines):
        line = lines[j]
        if m := _P2P_DEVICE.match(line):
            bus = f"{int(m.group(5), 16):08X}:{int(m.group(3), 16):02X}:{int(m.group(4), 16):02X}.0"
            parts.gpus.append(GpuSeen(piece, int(m.group(1)), "cuda", name=m.group(2), bus_id=bus))
        elif m := _P2P_HEADING.match(line):
            direction = (m.group(1) or "latency").lower()
            reads = " reads" if "P2P Reads" in line else ""  # newer samples print the reads' matrices too
            heading = (direction + reads, m.group(2) == "Enabled", m.group(3))
        elif line.startswith("P2P Connectivity Matrix"):
            heading = ("connectivity", False, "")
        elif _HEADER.match(line) and heading is not None:
            rows, cols, values, j = _matrix(lines, j)
            label, p2p, unit = heading
            if label != "connectivity":
                direction, _, reads = label.partition(" ")
                side = line.split()[0] if not line.split()[0].isdigit() else ""
                name = f"{direction} p2p={'enabled' if p2p else 'disabled'}" + (" reads" if reads else "")
                name += " CPU" if side == "CPU" else ""
                parts.copies.append(
                    _copy(piece, "p2pBandwidthLatencyTest", name, direction, p2p, unit, rows, cols, values)
                )
                seen += 1
            continue
        elif m := _CAN_ACCESS.match(line):  # cudaDeviceCanAccessPeer's answer for the pair
            peer = {"can-access-peer": "yes" if m.group(2) == "CAN" else "no"}
            parts.pairs.append(PairSeen(piece, f"cuda{m.group(1)}", f"cuda{m.group(3)}", p2p=peer))
        elif line.startswith(("***NOTE", "So you can see", "NOTE: The CUDA Samples")) or not line.strip():
            pass
        elif line.strip():
            break  # a line that is not the tool's: its output ended
        j += 1
    cut = "" if seen >= 6 else f"{seen} of the 6 matrices (the output is cut)" if seen else "no matrix"
    short = [c.testcase for c in parts.copies if _short(c)]
    if short:
        cut = "; ".join(x for x in (cut, f"the matrix {short[-1]} is cut") if x)
    cut = "; ".join(x for x in (cut_start, cut) if x)
    return Block("p2p-bandwidth-latency", i, j, parts, cut=cut)


def _copy(
    piece: int,
    tool: Literal["p2pBandwidthLatencyTest", "nvbandwidth"],
    name: str,
    direction: str,
    p2p: bool | None,
    unit: str,
    rows: list[str],
    cols: list[str],
    values: list[list[float | None]],
    sum_gbps: float | None = None,
) -> CopyMatrix:
    scale = 0.001 if unit == "ns" else 1.0
    return CopyMatrix(
        piece=piece,
        tool=tool,
        testcase=name,
        direction=direction,  # type: ignore[arg-type]
        p2p=p2p,
        unit="us" if unit in ("us", "ns") else "GB/s",
        rows=tuple(rows),
        columns=tuple(cols),
        values=tuple(tuple(None if v is None else v * scale for v in r) for r in values),
        sum_gbps=sum_gbps,
    )


def starts_nvbandwidth(lines: list[str], i: int) -> bool:
    """Whether nvbandwidth's text begins at line ``i`` (its version line, or a testcase's)."""
    return bool(_NVB_VERSION.match(lines[i]) or _NVB_RUNNING.match(lines[i]))


def _nvb_direction(description: str) -> str:
    if "latency" in description.lower():
        return "latency"
    return "bidirectional" if "<->" in description else "unidirectional"


def read_nvbandwidth(lines: list[str], i: int, piece: int) -> Block:
    """Every testcase's matrices, from line ``i``."""
    parts = Parts()
    version = ""
    testcase = description = ""
    pending: list[CopyMatrix] = []
    waived: list[str] = []
    j = i
    while j < len(lines):
        line = lines[j]
        if m := _NVB_VERSION.match(line):
            if version or pending or parts.copies:
                break  # the next run
            version = m.group(1)
        elif m := _DRIVER.match(line):
            parts.driver_version = m.group(1)
        elif m := _CUDA.match(line):
            code = int(m.group(1))
            parts.cuda_version = f"{code // 1000}.{code % 1000 // 10}"
        elif m := _NVB_DEVICE.match(line):
            bus = f"{m.group(3).upper()}:{m.group(4).upper()}:{m.group(5).upper()}.0" if m.group(3) else ""
            parts.gpus.append(GpuSeen(piece, int(m.group(1)), "cuda", name=m.group(2), bus_id=bus))
        elif m := _NVB_RUNNING.match(line):
            parts.copies += pending
            pending = []
            testcase = m.group(1)
        elif m := _NVB_DESCRIPTION.match(line):
            description = m.group(1)
        elif _HEADER.match(line) and description:
            rows, cols, values, j = _matrix(lines, j)
            if "CPU(row)" in description and len(rows) == 1:
                rows = ["host"]
            unit = "ns" if description.endswith("(ns)") else "GB/s"
            part = re.search(r"\) (\w+) bandwidth", description)
            name = testcase + (f"_{part.group(1).lower()}" if part and part.group(1) != "bandwidth" else "")
            pending.append(
                _copy(piece, "nvbandwidth", name, _nvb_direction(description), None, unit, rows, cols, values)
            )
            description = ""
            continue
        elif m := _NVB_WAIVED.match(line):
            waived.append(m.group(1))
        elif m := _NVB_SUM.match(line):
            if pending:
                last = pending.pop()
                pending.append(_with_sum(last, m.group(1), float(m.group(2))))
        elif line.strip() and testcase and not line.startswith(("NOTE", "Performance can", "Waived", "Error")):
            break  # after the testcases, text that is not nvbandwidth's
        elif line.strip() and not testcase and not _NVB_PREAMBLE.match(line):
            break  # text that is not nvbandwidth's before any testcase ran
        j += 1
    parts.copies += pending
    parts.pairs += _no_peer_pairs(piece, parts.gpus, [w for w in waived if w.startswith(PEER_TESTCASES)])
    cut = "" if parts.copies else "no testcase ran" + (f" ({', '.join(waived)} waived)" if waived else "")
    if description:
        cut = f"the matrix of {testcase} is cut"
    short = [c.testcase for c in parts.copies if _short(c)]
    if short:
        cut = "; ".join(x for x in (cut, f"the matrix of {short[-1]} is cut") if x)
    return Block("nvbandwidth", i, j, parts, version, cut)


def _no_peer_pairs(piece: int, gpus: list[GpuSeen], waived: list[str]) -> list[PairSeen]:
    """Every pair of the devices listed, without peer access, where a peer testcase was waived."""
    if not waived or len(gpus) < 2:
        return []
    idx = sorted({g.index for g in gpus})
    return [PairSeen(piece, f"cuda{a}", f"cuda{b}", p2p={"can-access-peer": "no"}) for a in idx for b in idx if a < b]


def _short(c: CopyMatrix) -> bool:
    """Whether the last row of a matrix ends before its last column (or the paste ended a number)."""
    return bool(c.values) and (
        c.values[-1][-1] is None and not (len(c.values) == len(c.columns) and c.rows[-1] == c.columns[-1])
    )


def _with_sum(c: CopyMatrix, name: str, total: float) -> CopyMatrix:
    """The matrix with the SUM line under it (whose name also tells a bidirectional case's parts apart)."""
    return replace(c, testcase=name if name.startswith(c.testcase.split("_read")[0]) else c.testcase, sum_gbps=total)


def nvbandwidth_json(doc: Any, piece: int) -> tuple[Parts, str, str]:
    """nvbandwidth's ``-j`` document as parts, its version, and what was cut ('' when whole)."""
    root = doc.get("nvbandwidth") if isinstance(doc, dict) else None
    if not isinstance(root, dict):
        return Parts(), "", "no nvbandwidth object"
    parts = Parts(driver_version=str(root.get("Driver Version", "")))
    for entry in root.get("GPU Device list") or []:
        if m := _NVB_JSON_DEVICE.match(str(entry)):
            bus = f"{m.group(3).upper()}:{m.group(4).upper()}:{m.group(5).upper()}.0" if m.group(3) else ""
            parts.gpus.append(GpuSeen(piece, int(m.group(1)), "cuda", m.group(7) or "", m.group(2), bus))
    cut = []
    waived: list[str] = []
    for t in root.get("testcases") or []:
        if not isinstance(t, dict):
            continue
        name, status = str(t.get("name", "")), str(t.get("status", ""))
        matrix = t.get("bandwidth_matrix")
        if status == "Waived" and name.startswith(PEER_TESTCASES):
            waived.append(name)
        if status != "Passed" or not isinstance(matrix, list) or not matrix:
            if status not in ("Waived", "Passed"):
                cut.append(f"{name}: {status or 'no status'}")
            continue
        description = str(t.get("bandwidth_description", ""))
        ncols = len(matrix[0]) if isinstance(matrix[0], list) else 0
        # a bidirectional testcase appends its Read1, Read2 and Total matrices' rows to one list
        chunk = ncols if len(matrix) > ncols and len(matrix) % ncols == 0 else len(matrix)
        chunks = [matrix[k : k + chunk] for k in range(0, len(matrix), chunk)]
        suffixes = ["_read1", "_read2", "_total"] if len(chunks) == 3 else [f"_{k + 1}" for k in range(len(chunks))]
        for k, rows in enumerate(chunks):
            values = [[number(str(v)) for v in r] if isinstance(r, list) else [] for r in rows]
            labels = ["host"] if "CPU(row)" in description and len(rows) == 1 else [str(n) for n in range(len(rows))]
            unit = "ns" if description.endswith("(ns)") else "GB/s"
            tc = name + (suffixes[k] if len(chunks) > 1 else "")
            total = number(str(t.get("sum"))) if len(chunks) == 1 else None
            cols = [str(n) for n in range(ncols)]
            parts.copies.append(
                _copy(piece, "nvbandwidth", tc, _nvb_direction(description), None, unit, labels, cols, values, total)
            )
    parts.pairs += _no_peer_pairs(piece, parts.gpus, waived)
    return parts, str(root.get("version", "")), "; ".join(cut)
