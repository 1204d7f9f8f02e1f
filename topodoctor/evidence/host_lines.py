"""The host's own text: ``lspci -vvv`` (a device's ACSCtl, LnkCap and LnkSta lines, or only those
lines as ``grep`` leaves them) and the kernel log's XID lines (their grammar is
``model.xid_lines``', the live probe's)::

    18:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)
    \t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported
    \t\tLnkSta:\tSpeed 16GT/s (downgraded), Width x16 (ok)
    \t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
    [ 5678.901234] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
"""

from __future__ import annotations

import re
from dataclasses import replace

from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.evidence import PcieSeen, XidSeen
from topodoctor.model.xid_lines import MARK, parse_line

_DEVICE = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) ([^:]+: .*)$")
_CAPS = re.compile(r"^\s*(LnkCap|LnkSta|ACSCtl|ACSCap|LnkCap2|LnkSta2|LnkCtl):\s*(.*)$")
_SPEED = re.compile(r"Speed ([\d.]+)GT/s(?: \((downgraded|ok)\))?")
_WIDTH = re.compile(r"Width x(\d+)(?: \((downgraded|ok)\))?")
_MORE = re.compile(r"^(?:\t|    )\s*\S.*(?::|[+-](?:\s|$))")  # a function's other lines: "Key: ..." or flags
_FLAG = re.compile(r"(\w+)([+-])")


def starts_lspci(lines: list[str], i: int) -> bool:
    """Whether lspci's text begins at line ``i``: a device line with capability lines under it, or
    a capability line that matters here (as ``lspci -vvv | grep`` leaves them)."""
    line = lines[i]
    if m := _CAPS.match(line):
        return m.group(1) in ("LnkCap", "LnkSta", "ACSCtl")
    return bool(_DEVICE.match(line) and i + 1 < len(lines) and lines[i + 1].startswith(("\t", "  ")))


def read_lspci(lines: list[str], i: int, piece: int) -> Block:
    """Each device's link and ACS lines, from line ``i`` to the first line that is not lspci's."""
    parts = Parts()
    current: PcieSeen | None = None
    j = i
    while j < len(lines):
        line = lines[j]
        if m := _DEVICE.match(line):
            if current is not None:
                parts.pcie.append(current)
            current = PcieSeen(piece, m.group(1), m.group(2).strip())
        elif m := _CAPS.match(line):
            if current is None or m.group(1) in _seen_caps(current):  # a function has one of each
                if current is not None:
                    parts.pcie.append(current)
                current = PcieSeen(piece, "")  # a grep's line: no device named
            current = _cap(current, m.group(1), m.group(2))
        elif current is not None and _MORE.match(line):
            pass  # the device's other lines
        elif line.strip():
            break
        j += 1
    if current is not None:
        parts.pcie.append(current)
    while j > i + 1 and not lines[j - 1].strip():
        j -= 1
    return Block("lspci", i, j, parts)


def _seen_caps(p: PcieSeen) -> set[str]:
    out = set()
    if p.link_cap is not None:
        out.add("LnkCap")
    if p.link_sta is not None:
        out.add("LnkSta")
    if p.acs_ctl:
        out.add("ACSCtl")
    return out


def _cap(p: PcieSeen, name: str, text: str) -> PcieSeen:
    """The device with one capability line read."""
    if name == "ACSCtl":
        return replace(p, acs_ctl={f: s == "+" for f, s in _FLAG.findall(text)})
    if name not in ("LnkCap", "LnkSta"):
        return p
    speed, width = _SPEED.search(text), _WIDTH.search(text)
    if speed is None or width is None:
        return p
    link = (float(speed.group(1)), int(width.group(1)))
    if name == "LnkCap":
        return replace(p, link_cap=link)
    down = "downgraded" in (speed.group(2) or "", width.group(2) or "")
    return replace(p, link_sta=link, downgraded=down or (False if "(ok)" in text else None))


def xid_lines(lines: list[str]) -> list[int]:
    """The XID lines among a log's lines (they come one by one among the kernel's other lines)."""
    return [k for k, line in enumerate(lines) if MARK in line]


def read_xids(lines: list[str], taken: list[int], piece: int) -> Block:
    """The XID events of the lines ``taken``."""
    parts = Parts()
    for k in taken:
        e = parse_line(lines[k])
        if e is not None:
            parts.xids.append(XidSeen(piece, e.code, e.bus_id, e.text))
    cut = "" if parts.xids else "no XID line could be read"
    return Block("kernel-xid", taken[0], taken[-1] + 1, parts, cut=cut, lines=tuple(taken))
