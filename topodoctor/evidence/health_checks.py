"""Health-check tools' lines that quote a measured copy against their threshold. Azure's node health
checks (azurehpc-health-checks, customTests/azure_gpu_bandwidth.nhc) run nvbandwidth and print each
figure under the configured threshold::

    ERROR:  nhc:  Health check failed:  check_gpu_bw: P2P test on GPU 1 to GPU 0 failed. Bandwidth 256.63
        is less than 335. FaultCode: NHC2020           (one line)
    ... check_gpu_bw: H2D test on GPU 3 failed. Bandwidth 20.1 is less than 24. ...

The figure is nvbandwidth's cell (the P2P test is ``device_to_device_memcpy_read_ce``; "GPU a to GPU b"
is the matrix's column a, row b); the threshold is the check's configuration, not the hardware's rate,
so only the figure is kept. The lines come among the tool's other lines and are gathered from the
whole input.
"""

from __future__ import annotations

import re

from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.evidence import CopyMatrix

MARK = "check_gpu_bw: "
_BW = re.compile(
    r"check_gpu_bw: (P2P|H2D|D2H) test on GPU (\d+)(?: to GPU (\d+))? failed\. Bandwidth ([\d.]+) is less than [\d.]+"
)
_TESTCASE = {
    "P2P": "device_to_device_memcpy_read_ce",
    "H2D": "host_to_device_memcpy_ce",
    "D2H": "device_to_host_memcpy_ce",
}


def nhc_lines(lines: list[str]) -> list[int]:
    """The check_gpu_bw failure lines among a log's lines."""
    return [k for k, line in enumerate(lines) if MARK in line and _BW.search(line)]


def read_nhc(lines: list[str], taken: list[int], piece: int) -> Block:
    """One copy matrix per test of the lines ``taken``, holding the figures quoted (None elsewhere)."""
    cells: dict[str, dict[tuple[str, str], float]] = {}
    for k in taken:
        m = _BW.search(lines[k])
        if m is None:
            continue
        test, gpu, peer, value = m.group(1), m.group(2), m.group(3), float(m.group(4))
        cell = (peer, gpu) if test == "P2P" and peer is not None else ("host", gpu)
        cells.setdefault(test, {})[cell] = value
    parts = Parts()
    for test, got in cells.items():
        rows = tuple(sorted({r for r, _ in got}, key=_order))
        if test == "P2P":
            rows = tuple(sorted({x for cell in got for x in cell}, key=_order))
        cols = tuple(sorted({c for _, c in got} | (set(rows) if test == "P2P" else set()), key=_order))
        values = tuple(tuple(got.get((r, c)) for c in cols) for r in rows)
        parts.copies.append(
            CopyMatrix(piece, "nvbandwidth", _TESTCASE[test], "unidirectional", None, "GB/s", rows, cols, values)
        )
    return Block("health-check", taken[0], taken[-1] + 1, parts, lines=tuple(taken))


def _order(label: str) -> tuple[int, int]:
    return (0, int(label)) if label.isdigit() else (-1, 0)
