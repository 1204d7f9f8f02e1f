"""The host's own text: ``lspci -vvv`` (a device's ACSCtl, LnkCap and LnkSta lines, or only those
lines as ``grep`` leaves them), the kernel log's XID lines (their grammar is
``model.xid_lines``', the live probe's) and the kernel's report of each function's PCIe link
(drivers/pci/pci.c ``__pcie_print_link_status``, printed at enumeration and by drivers at probe)::

    18:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)
    \t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported
    \t\tLnkSta:\tSpeed 16GT/s (downgraded), Width x16 (ok)
    \t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
    [ 5678.901234] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
    [ 10.7] pci 0000:04:00.0: 252.048 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x16 link at
        0000:01:00.0 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)
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
# the kernel's speed string: "16.0 GT/s PCIe" (5.x on), "16 GT/s" / "2.5 GT/s" (4.17-4.x), "Unknown"
_KSPEED = r"(?:(?P<{}>[\d.]{{1,5}}) GT/s(?: PCIe)?|Unknown(?: speed)?)"
LINK_MARK = " Gb/s available PCIe bandwidth"
MAX_LINE = 1000  # a kernel line is a few hundred characters; a longer one is not this
# what stands before the mark (the driver, the function, the figure) and what follows it, matched apart
# so that a long line cannot make the match backtrack
_LINK_HEAD = re.compile(
    r"(?:(?P<driver>[\w.-]{1,40}) )?(?P<bdf>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): "
    r"(?P<avail>\d{1,6}\.\d{3})$"
)
_LINK_TAIL = re.compile(
    rf"(?:, limited by {_KSPEED.format('speed')} x(?P<width>\d{{1,2}}) link at (?P<at>\S{{1,40}}) "
    rf"\(capable of (?P<cap>\d{{1,6}}\.\d{{3}}) Gb/s "
    rf"with {_KSPEED.format('cspeed')} x(?P<cwidth>\d{{1,2}}) link\)"
    rf"| \({_KSPEED.format('pspeed')} x(?P<pwidth>\d{{1,2}}) link\))"
)


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


def pcie_link_lines(lines: list[str]) -> list[int]:
    """The kernel's PCIe link reports among a log's lines (one per function, among the kernel's others)."""
    return [k for k, line in enumerate(lines) if LINK_MARK in line and _link(line) is not None]


def _link(line: str) -> tuple[re.Match[str], re.Match[str]] | None:
    """The kernel's link report in a line: (what stands before the mark, what follows it)."""
    k = line.find(LINK_MARK)
    if k < 0 or len(line) > MAX_LINE:
        return None
    head = _LINK_HEAD.search(line, max(0, k - 80), k)
    tail = _LINK_TAIL.match(line, k + len(LINK_MARK))
    return (head, tail) if head is not None and tail is not None else None


def _speed(text: str | None) -> float | None:
    return float(text) if text else None


def read_pcie_links(lines: list[str], taken: list[int], piece: int) -> Block:
    """Each function's link of the lines ``taken``: limited (the narrowest link on its path, where, and
    what the function could do) or not (its link as capable)."""
    parts = Parts()
    for k in taken:
        got = _link(lines[k])
        if got is None:
            continue
        h, m = got
        driver = h.group("driver") or ""
        desc = "" if driver in ("", "pci") else f"driver {driver}"
        avail = float(h.group("avail"))
        if m.group("at") is not None:
            sta, cap = _speed(m.group("speed")), _speed(m.group("cspeed"))
            at = m.group("at").strip(".")
            parts.pcie.append(
                PcieSeen(
                    piece, h.group("bdf"), desc,
                    link_cap=(cap, int(m.group("cwidth"))) if cap is not None else None,
                    link_sta=(sta, int(m.group("width"))) if sta is not None else None,
                    downgraded=True, limited_at="" if at == "<unknown>" else at,
                    available_gbit_s=avail, capable_gbit_s=float(m.group("cap")),
                )
            )  # fmt: skip
        else:
            speed = _speed(m.group("pspeed"))
            link = (speed, int(m.group("pwidth"))) if speed is not None else None
            parts.pcie.append(PcieSeen(piece, h.group("bdf"), desc, link_cap=link, link_sta=link, downgraded=False,
                                       available_gbit_s=avail, capable_gbit_s=avail))  # fmt: skip
    return Block("kernel-pcie-link", taken[0], taken[-1] + 1, parts, lines=tuple(taken))
