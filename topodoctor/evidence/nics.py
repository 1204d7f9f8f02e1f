"""The NICs' own word on their ports: ``ibstat``, ``ibstatus``, ``ibv_devinfo`` (its ``-v`` speed and width)
and ``ethtool``, each port with its state and negotiated rate, as people paste them beside a slow
multi-node run::

    CA 'mlx5_0'                                  Infiniband device 'mlx5_0' port 1 status:
            CA type: MT4123                              state:           4: ACTIVE
            Port 1:                                      rate:            100 Gb/sec (4X EDR)
                    State: Active                        link_layer:      InfiniBand
                    Rate: 200
                    Link layer: InfiniBand       Settings for ens1f0:
                                                         Speed: 100000Mb/s
    hca_id: mlx5_0                                       Link detected: yes
            port:   1
                    state:          PORT_ACTIVE (4)
                    active_width:   4X (2)
                    active_speed:   25.0 Gbps (32)
                    link_layer:     Ethernet

An RDMA port whose link layer is Ethernet is RoCE; ethtool's interface is plain Ethernet (what NCCL's
socket transport runs on). perftest's ``ib_write_bw`` / ``ib_read_bw`` / ``ib_send_bw`` report the device
they ran on and, under their ``#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]`` header (MB/sec
without ``--report_gbits``), the bandwidth measured: kept as the port's ``measured_gbps``."""

from __future__ import annotations

import re

from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.evidence import NicSeen

_IBSTAT_CA = re.compile(r"^CA '([\w.-]+)'\s*$")
_IBSTATUS = re.compile(r"^Infiniband device '([\w.-]+)' port (\d+) status:\s*$")
_DEVINFO = re.compile(r"^hca_id:\s*([\w.-]+)\s*$")
_ETHTOOL = re.compile(r"^Settings for ([\w.@:-]+):\s*$")
_KEY = re.compile(r"^\s+([A-Za-z_ ]+?):\s*(.*?)\s*$")
_PORT = re.compile(r"^\s+Port (\d+):\s*$")
_DEVINFO_PORT = re.compile(r"^\s+port:\s*(\d+)\s*$")
_GBPS = re.compile(r"([\d.]+)\s*Gb(?:/sec|ps|/s)?")
_WIDTH = re.compile(r"(\d+)X")
_MBPS = re.compile(r"(\d+)\s*Mb/s")
# ibv_devinfo's active_speed codes where it prints no figure (IB_SPEED_* of verbs.h), Gb/s per lane
_SPEED_CODE = {1: 2.5, 2: 5.0, 4: 10.0, 8: 10.0, 16: 14.0, 32: 25.0, 64: 50.0, 128: 100.0, 256: 200.0}
_ACTIVE = {"active", "4: active", "port_active (4)", "port_active"}
MAX_PORT_LINES = 80  # a port's or device's block; a longer one is something else
_PERF_TITLE = re.compile(r"^\s+(?:RDMA_(?:Write|Read)|Send) BW Test\s*$")
_PERF_DEVICE = re.compile(r"Device\s+:\s*([\w.-]+)")
_PERF_LINK = re.compile(r"Link type\s+:\s*(\w+)")
_PERF_HEAD = re.compile(r"^\s*#bytes\s+#iterations\s+BW peak\[(Gb|MB)/sec\]\s+BW average\[(?:Gb|MB)/sec\]")
_PERF_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)")
# an RDMA device's name as the verbs library gives it (mlx5_0, rdmap85s0, efa_0, bnxt_re0, irdma0, ibp12s0, ...),
# in the label a person writes above a result table pasted without perftest's own title ("GPU0 + rdmap85s0:")
_VERBS_DEVICE = re.compile(
    r"\b(mlx\d+_(?:bond_)?\d+|rdmap\w+|rocep\w+|ibp\w+|efa_?\d+|bnxt_re\d+|irdma\d+|qedr\d+|hfi\d_\d+)\b"
)
UNNAMED_DEVICE = "the perftest device"  # a run whose output and label name no device
_LABEL_LINES = 3  # the lines above a bare result table read for its device: a label, a dashed rule


def starts(lines: list[str], i: int) -> bool:
    """Whether one of the NIC tools' outputs begins at line ``i``."""
    line = lines[i]
    if _IBSTATUS.match(line):
        return True
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    if _IBSTAT_CA.match(line):
        return "CA type" in nxt or "Number of ports" in nxt or nxt.strip().startswith("Port ")
    if _DEVINFO.match(line):
        return bool(_KEY.match(nxt))
    if _ETHTOOL.match(line):
        return bool(_KEY.match(nxt))
    return bool(_PERF_TITLE.match(line)) or _bare_table(lines, i)


def _bare_table(lines: list[str], i: int) -> bool:
    """A perftest result table pasted without the test's title: its header with a result row under it."""
    return bool(_PERF_HEAD.match(lines[i])) and i + 1 < len(lines) and bool(_PERF_ROW.match(lines[i + 1]))


def _layer(text: str, rdma: bool) -> str:
    t = text.strip().lower()
    if t.startswith("infiniband"):
        return "IB"
    if t.startswith("ethernet"):
        return "RoCE" if rdma else "Ethernet"
    return ""


def _state(text: str) -> str:
    t = text.strip().lower()
    if t in _ACTIVE or (t.endswith("active") and "inactive" not in t):
        return "ACTIVE"
    if "down" in t or "disabled" in t or "polling" in t or "init" in t or "armed" in t:
        return "DOWN"
    return text.strip().upper()


def _rate(text: str) -> float | None:
    m = _GBPS.search(text)
    if m:
        return float(m.group(1))
    t = text.strip()
    return float(t) if re.fullmatch(r"\d+(?:\.\d+)?", t) else None


def _devinfo_rate(width: str, speed: str) -> float | None:
    """ibv_devinfo -v: the port's rate from its active width (4X) and per-lane speed (25.0 Gbps, or a code)."""
    w = _WIDTH.search(width)
    if w is None:
        return None
    lanes = int(w.group(1))
    s = _GBPS.search(speed)
    if s is not None:
        return lanes * float(s.group(1))
    code = re.search(r"\((\d+)\)", speed)
    per = _SPEED_CODE.get(int(code.group(1))) if code else None
    return lanes * per if per else None


def read(lines: list[str], i: int, piece: int) -> Block:
    """Every port of the consecutive NIC blocks from line ``i``."""
    parts = Parts()
    j = i
    while j < len(lines):
        line = lines[j]
        if m := _IBSTATUS.match(line):
            j = _read_ibstatus(lines, j + 1, piece, m.group(1), int(m.group(2)), parts)
        elif m := _IBSTAT_CA.match(line):
            j = _read_ibstat(lines, j + 1, piece, m.group(1), parts)
        elif m := _DEVINFO.match(line):
            j = _read_devinfo(lines, j + 1, piece, m.group(1), parts)
        elif m := _ETHTOOL.match(line):
            j = _read_ethtool(lines, j + 1, piece, m.group(1), parts)
        elif _PERF_TITLE.match(line):
            j = _read_perftest(lines, j + 1, piece, line.strip(), parts)
        elif _bare_table(lines, j):
            label = next((m.group(1) for k in range(j - 1, max(-1, j - 1 - _LABEL_LINES), -1)
                          if (m := _VERBS_DEVICE.search(lines[k]))), "")  # fmt: skip
            j = _read_perftest(lines, j, piece, "perftest", parts, label)
        elif not line.strip():
            j += 1
        else:
            break
    cut = "" if parts.nics else "no port shown"
    return Block("nic-status", i, j, parts, cut=cut)


def _fields(lines: list[str], j: int, stop: re.Pattern[str] | None = None) -> tuple[dict[str, str], int]:
    """The indented ``key: value`` lines from ``j`` (keys lower-case), and the line after them."""
    got: dict[str, str] = {}
    start = j
    while j < len(lines) and j - start < MAX_PORT_LINES:
        line = lines[j]
        if not line.strip() or (stop is not None and stop.match(line)) or not line[:1].isspace():
            break
        if m := _KEY.match(line):
            got.setdefault(m.group(1).strip().lower(), m.group(2))
        j += 1
    return got, j


def _read_ibstatus(lines: list[str], j: int, piece: int, name: str, port: int, parts: Parts) -> int:
    got, j = _fields(lines, j)
    parts.nics.append(
        NicSeen(
            piece,
            name,
            rate_gbps=_rate(got.get("rate", "")),
            link_layer=_layer(got.get("link_layer", ""), True),
            port=port,
            state=_state(got.get("state", "")),
            rate_text=got.get("rate", ""),
        )
    )
    return j


def _read_ibstat(lines: list[str], j: int, piece: int, name: str, parts: Parts) -> int:
    head, j = _fields(lines, j, _PORT)
    ca = head.get("ca type", "")
    while j < len(lines) and (m := _PORT.match(lines[j])):
        got, j = _fields(lines, j + 1, _PORT)
        parts.nics.append(
            NicSeen(
                piece,
                name,
                rate_gbps=_rate(got.get("rate", "")),
                link_layer=_layer(got.get("link layer", ""), True),
                port=int(m.group(1)),
                state=_state(got.get("state", "")),
                ca_type=ca,
                rate_text=got.get("rate", ""),
            )
        )
    return j


def _read_devinfo(lines: list[str], j: int, piece: int, name: str, parts: Parts) -> int:
    head, j = _fields(lines, j, _DEVINFO_PORT)
    part = head.get("vendor_part_id", "")
    ca = f"MT{part}" if part.isdigit() else ""
    while j < len(lines) and (m := _DEVINFO_PORT.match(lines[j])):
        got, j = _fields(lines, j + 1, _DEVINFO_PORT)
        rate = _devinfo_rate(got.get("active_width", ""), got.get("active_speed", ""))
        parts.nics.append(
            NicSeen(
                piece,
                name,
                rate_gbps=rate,
                link_layer=_layer(got.get("link_layer", ""), True),
                port=int(m.group(1)),
                state=_state(got.get("state", "")),
                ca_type=ca,
            )
        )
        while j < len(lines) and lines[j].strip() and not _DEVINFO_PORT.match(lines[j]) and lines[j][:1].isspace():
            j += 1  # a port's further lines (GIDs) past the first blank-free run
    return j


def _read_ethtool(lines: list[str], j: int, piece: int, name: str, parts: Parts) -> int:
    got, j = _fields(lines, j)
    speed = got.get("speed", "")
    m = _MBPS.search(speed)
    link = got.get("link detected", "").strip().lower()
    state = "ACTIVE" if link == "yes" else ("DOWN" if link == "no" else "")
    parts.nics.append(
        NicSeen(
            piece,
            name,
            rate_gbps=int(m.group(1)) / 1000 if m else None,
            link_layer="Ethernet",
            state=state,
            rate_text=speed,
        )
    )
    return j


def _read_perftest(lines: list[str], j: int, piece: int, title: str, parts: Parts, device: str = "") -> int:
    """One perftest run: its device (``device``, where a label above the table named it) and link type, and the
    largest message's average (Gb/s)."""
    link = ""
    unit = ""
    best: float | None = None
    start = j
    while j < len(lines) and j - start < MAX_PORT_LINES * 4:
        line = lines[j]
        if (m := _PERF_DEVICE.search(line)) and not device:
            device = m.group(1)
        if (m := _PERF_LINK.search(line)) and not link:
            link = m.group(1)
        if m := _PERF_HEAD.match(line):
            unit = m.group(1)
        elif unit and (m := _PERF_ROW.match(line)):
            avg = float(m.group(4))
            best = avg if unit == "Gb" else avg * 8 / 1000  # MB/sec: 10^6 bytes a second
        elif line.strip() and not line.startswith((" ", "-", "#", "\t")) and not _KEY.match(line):
            break
        j += 1
    layer = "IB" if link.upper() == "IB" else ("RoCE" if link.lower() == "ethernet" else "")
    shown = f"{title}: {best:g} Gb/s" if best is not None else title
    parts.nics.append(NicSeen(piece, device or UNNAMED_DEVICE, link_layer=layer, measured_gbps=best,
                              rate_text=shown))  # fmt: skip
    return j
