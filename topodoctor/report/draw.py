"""The topology picture: NVSwitch, GPUs and NICs, PCIe switches, host bridges and NUMA nodes,
with NVLink bundles (count x rate) and PCIe links (generation and width), and what the rules
found drawn where it happened.

The picture judges nothing itself: red and amber come only from the findings it is given
(``rules.evaluate``), placed by their subject: ``GPU3/nvlink5`` on GPU3's NVLink bundle,
``GPU3`` on the GPU (or on its PCIe link for a PCIe rule), ``GPU0-GPU3`` as an arc between the
two, ``bridge:0000:04:00.0`` on the switch or host bridge that holds that port, ``nic:mlx5_0``
on the NIC. Every finding is also listed under the picture.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from topodoctor.core.text import plural
from topodoctor.model.findings import SEVERITY_ORDER, Finding
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.report.layout import LEAF_H, MARGIN, Box, PictureLayout, layout
from topodoctor.report.svg import Svg, fit
from topodoctor.topology.graph import build_graph, gpu_node
from topodoctor.topology.hostgraph import HostGraph
from topodoctor.topology.hosttree import HostTree, build_tree

INK = "#1f2933"
MUTED = "#6b7280"
FILL = {"gpu": "#e9f5d6", "nic": "#dbeafe", "switch": "#f3f4f6", "hostbridge": "#fef3c7", "numa": "#ede9fe"}
STROKE = {"gpu": "#4d7c0f", "nic": "#1d4ed8", "switch": "#6b7280", "hostbridge": "#b45309", "numa": "#6d28d9"}
NVLINK = "#15803d"
PCIE = "#6b7280"
SEVERITY_INK = {"critical": "#b91c1c", "error": "#dc2626", "warning": "#d97706", "info": "#2563eb"}
PAIR_ARCS_MAX = 6  # more pairs than this for one rule: listed, not drawn (they would hide the host)


def _worst(findings: Sequence[Finding]) -> str | None:
    return max((f.severity for f in findings), key=SEVERITY_ORDER.__getitem__, default=None)


def _codes(findings: Sequence[Finding]) -> str:
    return " ".join(dict.fromkeys(f.code for f in findings))


class Marks:
    """Findings sorted onto the parts of the picture."""

    def __init__(self, findings: Sequence[Finding], tree: HostTree) -> None:
        self.box: dict[str, list[Finding]] = defaultdict(list)
        self.pcie: dict[str, list[Finding]] = defaultdict(list)
        self.nvlink: dict[str, list[Finding]] = defaultdict(list)
        self.pairs: dict[tuple[str, str], list[Finding]] = defaultdict(list)
        by_code_pairs: dict[str, int] = defaultdict(int)
        nodes = tree.nodes()
        for f in findings:
            if m := re.fullmatch(r"GPU(\d+)/nvlink\d+", f.subject):
                self.nvlink[gpu_node(int(m.group(1)))].append(f)
            elif m := re.fullmatch(r"GPU(\d+)-GPU(\d+)", f.subject):
                by_code_pairs[f.code] += 1
            elif m := re.fullmatch(r"GPU(\d+)", f.subject):
                key = gpu_node(int(m.group(1)))
                {"1": self.nvlink, "2": self.pcie}.get(f.code[2], self.box)[key].append(f)
                if f.code[2] == "1":  # a GPU with no NVLink up has no bundle to mark: mark the GPU too
                    self.box[key].append(f)
            elif f.subject.startswith("bridge:"):
                bdf = f.subject.split(":", 1)[1]
                node = next((n for n in nodes if n.bus_id == bdf or bdf in n.ports), None)
                if node is not None:
                    self.box[node.key].append(f)
            elif f.subject.startswith("nic:"):
                name = f.subject.split(":", 1)[1].split("/", 1)[0]  # nic:mlx5_0/1 is port 1 of mlx5_0
                node = next((n for n in nodes if n.kind == "nic" and n.label == name), None)
                if node is not None:
                    self.box[node.key].append(f)
        for f in findings:
            m = re.fullmatch(r"GPU(\d+)-GPU(\d+)", f.subject)
            if m and by_code_pairs[f.code] <= PAIR_ARCS_MAX:
                self.pairs[(gpu_node(int(m.group(1))), gpu_node(int(m.group(2))))].append(f)


def _gen_width(gen: int | None, width: int | None) -> str:
    return f"Gen{gen or '?'} x{width or '?'}"


def _draw_box(svg: Svg, box: Box, marks: Marks, snap: HostSnapshot) -> None:
    n = box.node
    flagged = marks.box.get(n.key, [])
    sev = _worst(flagged)
    stroke = SEVERITY_INK[sev] if sev else STROKE[n.kind]
    fill = "#fee2e2" if sev in ("critical", "error") else "#fef3c7" if sev == "warning" else FILL[n.kind]
    dash = "5 3" if n.synthetic else None
    svg.open_group(class_=f"{n.kind}{' fault' if sev else ''}", data_key=n.key, data_codes=_codes(flagged) or None)
    svg.rect(
        box.x,
        box.y,
        box.w,
        box.h,
        rx=6.0,
        fill=fill,
        stroke=stroke,
        stroke_width=2.2 if sev else 1.2,
        stroke_dasharray=dash,
    )
    _box_text(svg, box, flagged, stroke, snap)
    svg.close_group()


def _box_text(svg: Svg, box: Box, flagged: list[Finding], stroke: str, snap: HostSnapshot) -> None:
    n = box.node
    inner = box.w - 12
    if n.kind in ("gpu", "nic"):
        svg.text(box.x + 8, box.y + 18, n.key if n.kind == "gpu" else n.label, 14, font_weight="bold", fill=INK)
        # "NVIDIA " adds nothing inside a GPU box, and the model name must fit.
        sub = n.label.removeprefix("NVIDIA ") if n.kind == "gpu" else _nic_text(snap, n.label)
        svg.text(box.x + 8, box.y + 34, fit(sub, 10.5, inner), 10.5, fill=INK)
        svg.text(box.x + 8, box.y + 49, n.bus_id or "no PCI address", 10, fill=MUTED)
        if flagged:
            svg.text(
                box.x + box.w - 6,
                box.y + 18,
                fit(_codes(flagged), 10, inner - 40),
                10,
                fill=stroke,
                text_anchor="end",
                font_weight="bold",
            )
        return
    if n.kind == "switch":
        title = "PCIe switch (written for NCCL)" if n.synthetic else "PCIe switch"
        detail = n.bus_id or ""
    elif n.kind == "hostbridge":
        title, detail = n.label, "root complex"
    else:
        title, detail = n.label, _cpus_text(snap, n.numa)
    svg.text(box.x + 8, box.y + 16, fit(title, 12, inner), 12, font_weight="bold", fill=INK)
    text = detail
    if flagged:
        text = f"{_codes(flagged)} on {flagged[0].subject.split(':', 1)[-1]}"
    svg.text(box.x + 8, box.y + 31, fit(text, 10, inner), 10, fill=stroke if flagged else MUTED)


def _nic_text(snap: HostSnapshot, name: str) -> str:
    nic = next((x for x in snap.nics if x.name == name), None)
    if nic is None:
        return "NIC"
    kind = {"infiniband": "IB", "roce": "RoCE", "ethernet": "Ethernet"}[nic.kind]
    return f"{kind} {nic.rate_gbps:g} Gb/s" if isinstance(nic.rate_gbps, float) else kind


def _cpus_text(snap: HostSnapshot, numa: int | None) -> str:
    node = next((n for n in snap.host.numa_nodes if n.id == numa), None)
    if node is None or not node.cpus:
        return "CPUs unknown"
    lo, hi = min(node.cpus), max(node.cpus)
    span = f"{lo}-{hi}" if len(node.cpus) == hi - lo + 1 else plural(len(node.cpus), "CPU")
    return f"CPUs {span}"


def _draw_pcie(svg: Svg, lay: PictureLayout, marks: Marks) -> None:
    for child, par in lay.parent.items():
        a, b = lay.boxes.get(child), lay.boxes.get(par)
        if a is None or b is None or b.node.kind == "numa":
            continue
        flagged = marks.pcie.get(child, [])
        sev = _worst(flagged)
        colour = SEVERITY_INK[sev] if sev else PCIE
        x, y0, y1 = a.cx, a.y + a.h, b.y
        svg.line(
            x,
            y0,
            x,
            y1,
            stroke=colour,
            stroke_width=3.0 if sev else 1.6,
            class_="pcie fault" if sev else "pcie",
            data_key=child,
            data_codes=_codes(flagged) or None,
        )
        link = a.node.link
        if link.gen is None and link.width is None and link.gen_max is None:
            continue
        label = _gen_width(link.gen_max or link.gen, link.width or link.width_max)
        if link.width and link.width_max and link.width < link.width_max:
            label = f"{_gen_width(link.gen, link.width)} of x{link.width_max}"
        if flagged:
            label = f"{label} {_codes(flagged)}"
        svg.text(x + 5, (y0 + y1) / 2 + 4, label, 10, fill=colour, font_weight="bold" if sev else None)
    for key, box in lay.boxes.items():  # host bridges rest on their NUMA node
        below = lay.parent.get(key)
        if box.node.kind == "hostbridge" and below is not None and below in lay.boxes:
            svg.line(box.cx, box.y + box.h, box.cx, lay.boxes[below].y, stroke=PCIE, stroke_width=1.6)


def _draw_nvlink(
    svg: Svg, snap: HostSnapshot, g: HostGraph, lay: PictureLayout, marks: Marks, band: tuple[float, float] | None
) -> None:
    gpus = [b for b in lay.boxes.values() if b.node.kind == "gpu"]
    if band is not None:
        _, bottom = band
        for box in gpus:
            e = (
                [g.edges[box.node.key, m] for m in g.neighbors(box.node.key) if g.nodes[m]["kind"] == "nvswitch"]
                if box.node.key in g
                else []
            )
            links = sum(x["links"] for x in e)
            rate = next((x["link_gbps"] for x in e if x.get("link_gbps")), None)
            flagged = marks.nvlink.get(box.node.key, [])
            sev = _worst(flagged)
            x = box.cx
            svg.open_group(
                class_="nvlink fault" if sev else "nvlink",
                data_key=box.node.key,
                data_links=links,
                data_codes=_codes(flagged) or None,
            )
            if links:
                svg.line(x, box.y, x, bottom, stroke=NVLINK, stroke_width=min(2 + links / 3, 8.0))
                svg.text(
                    x + 7,
                    bottom + 20,
                    f"{links} × {rate:.4g} GB/s" if rate else plural(links, "link"),
                    10.5,
                    fill=NVLINK,
                    font_weight="bold",
                )
            elif flagged:
                svg.line(
                    x, box.y, x, bottom, stroke=SEVERITY_INK[sev or "error"], stroke_width=2.0, stroke_dasharray="6 4"
                )
            if flagged:
                # One TD101 per link, or one per GPU listing its down links in the evidence.
                down = sum(len(f.evidence.get("down") or [0]) for f in flagged if f.code == "TD101")
                note = f"{down} down" if down else _codes(flagged)
                svg.text(
                    x + 7,
                    bottom + 34,
                    f"{note} ({_codes(flagged)})" if down else note,
                    10,
                    fill=SEVERITY_INK[sev or "error"],
                    font_weight="bold",
                )
            svg.close_group()
    # NVLinks straight between GPUs (no switch), then pairs the rules flagged: arcs over the GPU row.
    arcs: list[tuple[str, str, str, str, bool]] = []
    for u, v, e in sorted(g.edges(data=True), key=lambda t: (t[0], t[1])):
        if e["kind"] == "nvlink" and g.nodes[u]["kind"] == "gpu" and g.nodes[v]["kind"] == "gpu":
            arcs.append((u, v, f"NV{e['links']}", NVLINK, False))
    for (u, v), flagged in sorted(marks.pairs.items()):
        arcs.append((u, v, _codes(flagged), SEVERITY_INK[_worst(flagged) or "error"], True))
    _arcs(svg, lay, arcs)


def _arcs(svg: Svg, lay: PictureLayout, arcs: list[tuple[str, str, str, str, bool]]) -> None:
    """Each arc ends at its own point on a GPU's top edge; a label is written once, on the widest
    arc that carries it (NV# labels, which differ per pair, on every arc)."""
    arcs = [a for a in arcs if a[0] in lay.boxes and a[1] in lay.boxes]
    ends: dict[str, list[str]] = defaultdict(list)
    for u, v, *_ in arcs:
        ends[u].append(v)
        ends[v].append(u)

    def end_x(key: str, other: str) -> float:
        box = lay.boxes[key]
        peers = sorted(ends[key], key=lambda k: lay.boxes[k].cx)
        k = peers.index(other)
        return box.x + 14 + (box.w - 28) * (k + 1) / (len(peers) + 1)

    labelled: set[str] = set()
    for u, v, label, colour, dashed in sorted(arcs, key=lambda a: -abs(lay.boxes[a[0]].cx - lay.boxes[a[1]].cx)):
        x0, x1 = sorted((end_x(u, v), end_x(v, u)))
        y = lay.boxes[u].y
        lift = min(20 + (x1 - x0) * 0.14, 80.0)
        svg.path(
            f"M {x0:.1f} {y:.1f} Q {(x0 + x1) / 2:.1f} {y - 2 * lift:.1f} {x1:.1f} {y:.1f}",
            fill="none",
            stroke=colour,
            stroke_width=1.8,
            stroke_dasharray="5 4" if dashed else None,
            class_="pair",
            data_pair=f"{u}-{v}",
        )
        if label not in labelled or label.startswith("NV"):
            labelled.add(label)
            svg.text((x0 + x1) / 2, y - lift - 4, label, 10, fill=colour, text_anchor="middle", font_weight="bold")


def _title(snap: HostSnapshot) -> tuple[str, str]:
    models = sorted({g.name for g in snap.gpus if isinstance(g.name, str)})
    what = f"{len(snap.gpus)} × {', '.join(models) or 'GPU'}"
    host = snap.host
    parts = [
        host.virtualization if host.virtualization != "unknown" else "",
        f"driver {host.driver_version}" if isinstance(host.driver_version, str) else "",
    ]
    return f"{host.hostname}: {what}", " · ".join(p for p in parts if p)


def _panel(svg: Svg, findings: Sequence[Finding], y: float, width: float) -> float:
    svg.text(
        MARGIN, y + 16, f"Findings ({len(findings)})" if findings else "No findings", 13, font_weight="bold", fill=INK
    )
    y += 26
    groups: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        groups[f.code].append(f)
    for code, fs in groups.items():
        f = fs[0]
        subjects = (
            f.subject
            if len(fs) == 1
            else f"{len(fs)} × ({', '.join(x.subject for x in fs[:3])}{', …' if len(fs) > 3 else ''})"
        )
        svg.circle(MARGIN + 5, y + 11, 4.5, fill=SEVERITY_INK[f.severity])
        line = f"{code} {f.severity}  {subjects}: {f.message}"
        svg.text(MARGIN + 16, y + 15, fit(line, 11, width - 2 * MARGIN - 16), 11, fill=INK)
        y += 18
    return y + 10


def _legend(svg: Svg, x: float, y: float, shown: set[str]) -> None:
    every = [
        (NVLINK, "NVLink", None),
        (PCIE, "PCIe", None),
        (SEVERITY_INK["error"], "fault", None),
        (STROKE["switch"], "written for NCCL", "5 3"),
    ]
    items = [i for i in every if i[1] in shown]
    x -= sum(40 + len(label) * 6.5 for _, label, _ in items)
    for colour, label, dash in items:
        svg.line(x, y, x + 22, y, stroke=colour, stroke_width=3.0, stroke_dasharray=dash)
        svg.text(x + 27, y + 4, label, 10, fill=MUTED)
        x += 40 + len(label) * 6.5


def draw_topology(
    snap: HostSnapshot, findings: Sequence[Finding] = (), g: HostGraph | None = None, group_flat: bool = False
) -> str:
    """The picture as SVG text. ``findings`` are drawn in place and listed; nothing else is judged."""
    g = g if g is not None else build_graph(snap)
    tree = build_tree(snap, g, group_flat=group_flat)
    marks = Marks(findings, tree)
    switches = [n for n in g.nodes if g.nodes[n]["kind"] == "nvswitch"]
    band_y = 70.0
    leaf_y = band_y + (44.0 + 86.0 if switches else 40.0)
    if marks.pairs or any(
        e["kind"] == "nvlink" and g.nodes[u]["kind"] == g.nodes[v]["kind"] == "gpu" for u, v, e in g.edges(data=True)
    ):
        leaf_y += 50.0
    lay = layout(tree, leaf_y)
    ordered = sorted(findings, key=lambda f: (-SEVERITY_ORDER[f.severity], f.code, f.subject))
    groups = len({f.code for f in findings})
    width = max(lay.width, 760.0)
    height = lay.bottom + 40 + 26 + 18 * groups + 20
    title, sub = _title(snap)
    svg = Svg(width, height, title)
    svg.text(MARGIN, 30, title, 17, font_weight="bold", fill=INK)
    svg.text(MARGIN, 50, sub, 11, fill=MUTED)
    shown = {"PCIe"}
    if any(k == "nvlink" for _, _, k in g.edges(data="kind")):
        shown.add("NVLink")
    if findings:
        shown.add("fault")
    if any(n.synthetic for n in tree.nodes()):
        shown.add("written for NCCL")
    _legend(svg, width - MARGIN, 26, shown)
    band = None
    if switches:
        gpus = [b for b in lay.boxes.values() if b.node.kind == "gpu"]
        x0 = min((b.x for b in gpus), default=MARGIN)
        x1 = max((b.x + b.w for b in gpus), default=width - MARGIN)
        inferred = all(g.nodes[s].get("inferred") for s in switches)
        label = "NVSwitch fabric" if inferred else f"NVSwitch × {len(switches)}"
        note = "inferred: the switches are not visible from this host" if inferred else ""
        svg.rect(
            x0,
            band_y,
            x1 - x0,
            44.0,
            rx=6.0,
            fill="#d1fae5",
            stroke="#047857",
            stroke_width=1.2,
            stroke_dasharray="6 3" if inferred else None,
        )
        svg.text(x0 + 10, band_y + 19, label, 13, font_weight="bold", fill=INK)
        svg.text(x0 + 10, band_y + 35, note, 10, fill=MUTED)
        band = (band_y, band_y + 44.0)
    _draw_pcie(svg, lay, marks)
    _draw_nvlink(svg, snap, g, lay, marks, band)
    for key in sorted(
        lay.boxes, key=lambda k: ("numa", "hostbridge", "switch", "nic", "gpu").index(lay.boxes[k].node.kind)
    ):
        _draw_box(svg, lay.boxes[key], marks, snap)
    if not tree.roots and not tree.unplaced:
        svg.text(MARGIN, leaf_y + LEAF_H / 2, "no GPUs found", 14, fill=MUTED)
    _panel(svg, ordered, lay.bottom + 30, width)
    return svg.render()
