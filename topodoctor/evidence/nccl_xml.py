"""NCCL's topology dump (``NCCL_TOPO_DUMP_FILE``, the ``<system>`` NCCL_TOPO_FILE reads) and graph dump
(``NCCL_GRAPH_DUMP_FILE``, ``<graphs>``): the host as NCCL saw it. The vocabulary (link speeds,
PCI classes) is ``topology.ncclxml``'s, from NCCL's own source (src/graph/xml.cc, topo.cc)::

    <system version="1">
      <cpu numaid="0" ...><pci busid="0000:00:06.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" rank="0" gdr="1"><nvlink target="..." count="18" tclass="0x068000"/></gpu>
      <nic><net name="mlx5_0" dev="0" speed="400000" port="1" gdr="1"/></nic>
    <graphs version="1"><graph id="0" pattern="4" nchannels="16" speedintra="40" typeintra="NVL" ...>

A paste cut before its closing tag is closed here and read as far as it goes.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET  # the XML parser: NCCL's dumps are XML
from dataclasses import replace

from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.evidence import GpuSeen, Kind, NicSeen
from topodoctor.model.nccl_account import NcclGraphSeen
from topodoctor.topology.ncclxml import pci_kind, speed_per_lane

_OPEN = re.compile(r"^\s*<(system|graphs)\b")
# a paste that begins inside the dump: an element of NCCL's vocabulary with its attributes
_FRAGMENT = re.compile(r'^\s*<(?:(cpu|pci|gpu|nic|net)\s+(?:numaid|busid|dev|name)="|(graph)\s+id=")')
_TAG = re.compile(r"<(/?)(\w+)\b[^<>]*?(/?)>")
_GEN_BY_LANE = {15: 1, 30: 2, 60: 3, 120: 4, 240: 5, 480: 6}
MAX_XML_LINES = 20_000


def starts(lines: list[str], i: int) -> bool:
    """Whether a topology or graph dump begins at line ``i``."""
    return bool(_OPEN.match(lines[i]) or _FRAGMENT.match(lines[i]))


def read(lines: list[str], i: int, piece: int) -> Block:
    """The dump from its top element at line ``i`` to its closing tag (or as far as the paste goes)."""
    top = _OPEN.match(lines[i])
    fragment = _FRAGMENT.match(lines[i]) if top is None else None
    name = top.group(1) if top else "graphs" if fragment and fragment.group(2) else "system"
    kind: Kind = "nccl-topo-xml" if name == "system" else "nccl-graph-xml"
    j = i
    closed = False
    while j < len(lines) and j - i < MAX_XML_LINES:
        if f"</{name}>" in lines[j]:
            closed = True
            j += 1
            break
        stripped = lines[j].strip()
        if j > i and stripped and not stripped.startswith("<") and not lines[j - 1].rstrip().endswith(("=", '"')):
            break  # the dump ended without its closing tag: text of something else
        j += 1
    text = "\n".join(lines[i:j])
    cut = ""
    if fragment is not None:
        text, cut = f"<{name}>\n{text}", f"the paste starts inside the dump, without <{name}>"
    inside: list[str] = []
    if not closed:
        text, more, inside = _closed(text, name)
        cut = "; ".join(x for x in (cut, more) if x)
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        return Block(kind, i, j, Parts(), cut="holds a DTD, which NCCL refuses: not read")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        return Block(kind, i, j, Parts(), cut=f"not well-formed XML: {exc}")
    parts = _system(root, piece) if kind == "nccl-topo-xml" else _graphs(root, piece)
    if "gpu" in inside and parts.gpus:
        # the paste ended inside the last GPU's element: its NVLinks are not all shown (not shown, not fewer)
        last = parts.gpus[-1]
        parts.gpus[-1] = replace(last, nvlinks_up=None)
        cut += f"; it ends inside the element of GPU dev {last.index} (its NVLinks not all shown)"
    return Block(kind, i, j, parts, root.get("version", ""), cut)


def _closed(text: str, name: str) -> tuple[str, str, list[str]]:
    """A cut dump closed: its last partial tag dropped, closing tags of elements the paste does not
    hold dropped, every open element closed; with the elements the paste ended inside."""
    last = text.rfind("<")
    if last >= 0 and ">" not in text[last:]:
        text = text[:last]
    stack: list[str] = []
    out: list[str] = []
    k = 0
    for m in _TAG.finditer(text):
        out.append(text[k : m.start()])
        k = m.end()
        if m.group(1):
            if not stack or stack[-1] != m.group(2):
                continue  # closes an element opened before the paste began
            stack.pop()
        elif not m.group(3):
            stack.append(m.group(2))
        out.append(m.group(0))
    out.append(text[k:])
    closing = "".join(f"</{t}>" for t in reversed(stack))
    return "".join(out) + closing, f"the dump ends before </{name}>", stack


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.strip().lstrip("-").isdigit() else None


def _system(root: ET.Element, piece: int) -> Parts:
    """GPUs (PCIe link, NVLinks) and NICs (rate, GPUDirect) of a topology dump."""
    parts = Parts()
    for pci in root.iter("pci"):
        gpu = pci.find("gpu")
        if gpu is None or pci_kind(pci.get("class", "0x03")) != "gpu":
            continue
        lane = speed_per_lane(pci.get("link_speed", ""))
        links = sum(_int(n.get("count")) or 0 for n in gpu.findall("nvlink"))
        bus = pci.get("busid", "").upper()
        parts.gpus.append(
            GpuSeen(
                piece,
                _int(gpu.get("dev")) or 0,
                "cuda",
                bus_id=f"0000{bus}" if bus.count(":") == 2 and len(bus.split(":")[0]) == 4 else bus,
                pcie_gen=_GEN_BY_LANE.get(lane) if lane is not None else None,
                pcie_width=_int(pci.get("link_width")) or None,  # 0 where the VM hides it
                nvlinks_up=links if gpu.findall("nvlink") else None,
            )
        )
    parent = {child: up for up in root.iter() for child in up}
    for net in root.iter("net"):
        speed = _int(net.get("speed"))
        pci = parent.get(parent.get(net, net), net)  # <pci><nic><net/></nic></pci>: the link the net is behind
        lane = speed_per_lane(pci.get("link_speed", "")) if pci.tag == "pci" else None
        width = _int(pci.get("link_width")) if pci.tag == "pci" else None
        parts.nics.append(
            NicSeen(
                piece,
                net.get("name", ""),
                rate_gbps=speed / 1000 if speed else None,  # NCCL's speed is Mb/s
                gdr=None if net.get("gdr") is None else net.get("gdr") == "1",
                pci_busid=pci.get("busid", "") if pci.tag == "pci" else "",
                pci_link_gbps=width * lane / 80.0 if lane and width else None,  # topo.cc: width*speed/80.0
            )
        )
    return parts


def _graphs(root: ET.Element, piece: int) -> Parts:
    """Each graph NCCL searched: its pattern, channels, speeds and link types."""
    parts = Parts()
    for g in root.iter("graph"):
        parts.graphs.append(
            NcclGraphSeen(
                piece,
                pattern=_int(g.get("pattern")),
                channels=_int(g.get("nchannels")),
                speed_intra_gbps=_float(g.get("speedintra")),
                speed_inter_gbps=_float(g.get("speedinter")),
                type_intra=g.get("typeintra", ""),
                type_inter=g.get("typeinter", ""),
                crossnic=_int(g.get("crossnic")),
                nets=len({n.get("dev") for n in g.iter("net")}),
            )
        )
    return parts


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None
