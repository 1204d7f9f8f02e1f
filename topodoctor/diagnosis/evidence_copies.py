"""Copy matrices judged against the links they cross: GPU pairs (p2pBandwidthLatencyTest, nvbandwidth's
device_to_device testcases) against the pair's NVLinks or PCIe path, host copies (nvbandwidth's
host_to_device / device_to_host) against each GPU's PCIe link. A copy far under its link is a symptom
for the causes; one at what healthy links reach is normal for this hardware."""

from __future__ import annotations

import re

from topodoctor.diagnosis.evidence_expect import copy_nominal
from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.diagnosis.evidence_leads import Symptom
from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.model.evidence import CopyMatrix
from topodoctor.topology.graph import pcie_gbps

# Where the evidence shows neither the pair's links nor the GPU's model: the slowest link a GPU trains to at
# full width (Gen3 x16), so only a copy no healthy x16 GPU gives is a symptom (staged copies reach it too).
FLOOR_LINK = (pcie_gbps(3, 16) or 15.76, "the link rate: PCIe Gen3 x16 at least (the GPUs' model and link not shown)")
HOST_COPY_SHARE = 0.88  # host copies of a healthy link: 55.5 GB/s of PCIe Gen5 x16's 63 on the H200 hosts
COPY_LOW = 0.6  # a copy under this share of its path's nominal rate (healthy: 0.82 NVLink, 0.88 PCIe on H200)


def peer_copies(f: Facts) -> tuple[list[Symptom], list[tuple[str, float, float, str]]]:
    """The posted GPU-to-GPU copy matrices against each pair's nominal rate: the symptoms of the pairs short of
    it, and the figures of the matrices that are normal (for the "normal" answer)."""
    symptoms, normal = [], []
    for c in f.copies:
        if c.unit != "GB/s" or c.p2p is False or c.direction == "latency" or "host" in c.rows or is_local(c):
            continue
        worst: tuple[float, str, float, float, str] | None = None
        for i, r in enumerate(c.rows):
            for j, col in enumerate(c.columns):
                v = c.values[i][j] if i < len(c.values) and j < len(c.values[i]) else None
                if r == col or v is None or not (r.isdigit() and col.isdigit()):
                    continue
                nom = copy_nominal(f, int(r), int(col)) or FLOOR_LINK
                rate = nom[0] * (2 if both_ways(c) else 1)
                if worst is None or v / rate < worst[0]:
                    worst = (v / rate, f"GPU{r}-GPU{col}", v, rate, nom[1])
        if worst is None:
            continue
        share, subject, v, rate, basis = worst
        label = f"{c.tool} {c.testcase}"
        if share < COPY_LOW:
            q = f"{f.where.get(c.piece, c.tool)}: {label}"
            symptoms.append(Symptom("copy", subject, v, rate * 0.82, basis + "; copies reach about 0.82 of it", 0, 1,
                                    Quote(q)))  # fmt: skip
        elif basis != FLOOR_LINK[1]:  # above the floor says only that no x16 link is broken, not that all is well
            normal.append((label, v, rate, basis))
    return symptoms, normal


def is_local(c: CopyMatrix) -> bool:
    """nvbandwidth's device_local_copy: each GPU copies within its own memory, one row of GPUs; no pair."""
    return "local" in c.testcase.lower()


def local_copies(f: Facts) -> list[tuple[str, str, str, dict[str, object]]]:
    """Copies within each GPU's memory: (subject, message, fix, evidence) for information only. A copy reads
    and writes each byte, so half the memory's rate is its ceiling; how near it comes depends on the clocks
    and the buffer size as much as on the memory, which the figure alone cannot tell apart."""
    out = []
    for c in f.copies:
        if c.unit != "GB/s" or not is_local(c):
            continue
        got = [v for row in c.values for v in row if v is not None]
        if not got:
            continue
        v, label = min(got), f"{c.tool} {c.testcase}"
        msg = f"{label}: the slowest GPU copies {v:.0f} GB/s within its memory"
        ev: dict[str, object] = {"measured_gbps": v}
        if f.model is not None:
            ceiling = f.model.memory_tbps * 1000 / 2
            msg += (f", {v / ceiling:.2f} of half the {f.model.name}'s {f.model.memory_tbps:g} TB/s ({f.model.memory}; "
                    "a copy reads and writes each byte)")  # fmt: skip
            ev |= {"ceiling_gbps": ceiling, "model": f.model.name}
        msg += "; not judged: the clocks and the buffer size move it as much as the memory does"
        fix = ("Post `nvidia-smi -q -d CLOCK,PERFORMANCE` taken during the run (clocks and their event reasons) and "
               "the same testcase at other buffer sizes (nvbandwidth -b 1024, -b 4096).")  # fmt: skip
        out.append((label, msg, fix, ev))
    return out


def both_ways(c: CopyMatrix) -> bool:
    """Whether a matrix's figures count both directions together: p2pBandwidthLatencyTest's bidirectional
    ones and nvbandwidth's "Total"; nvbandwidth's Read1 / Read2 (Write1 / 2) of a bidirectional testcase are
    one direction each, while the other runs (389 GB/s each, 779 total, on the H200 hosts)."""
    if c.direction != "bidirectional":
        return False
    return not (c.tool == "nvbandwidth" and re.search(r"(read|write)[12]\b|(read|write)[12]$", c.testcase.lower()))


def host_copies(f: Facts) -> tuple[list[Symptom], list[tuple[str, float, float, str]]]:
    """Host copies (nvbandwidth's host_to_device / device_to_host CE testcases, one direction at a time)
    against each GPU's PCIe link: copies reach about 0.88 of it (55.5 GB/s of Gen5 x16's 63 on H200)."""
    symptoms, normal = [], []
    for c in f.copies:
        name = c.testcase.lower()
        if c.unit != "GB/s" or c.rows != ("host",) or "_ce" not in name or "bidirectional" in name:
            continue
        if not name.startswith(("host_to_device", "device_to_host")):
            continue  # all_to_host and host_to_all load every link at once
        worst: tuple[float, str, float, float, str] | None = None
        for j, col in enumerate(c.columns):
            v = c.values[0][j] if c.values and j < len(c.values[0]) else None
            if v is None or not col.isdigit():
                continue
            rate, basis = host_link(f, int(col))
            if worst is None or v / rate < worst[0]:
                worst = (v / rate, col, v, rate, basis)
        if worst is None:
            continue
        share, col, v, rate, basis = worst
        label = f"{c.tool} {c.testcase}"
        if share < COPY_LOW:
            q = Quote(f"{f.where.get(c.piece, c.tool)}: {label}")
            symptoms.append(Symptom("copy", f"host-GPU{col}", v, rate * HOST_COPY_SHARE,
                                    basis + f"; host copies reach about {HOST_COPY_SHARE:g} of it", 0, 1, q,
                                    gpus=(int(col),)))  # fmt: skip
        elif basis != FLOOR_LINK[1]:
            normal.append((label, v, rate, basis))
    return symptoms, normal


def host_link(f: Facts, gpu: int) -> tuple[float, str]:
    """One GPU's PCIe link rate one way (GB/s) and its basis: nvidia-smi -q's generation (at its max: an
    idle GPU drops it) and width for that GPU, else the model's link, else the floor."""
    g = next((x for x in f.gpus if x.index == gpu and (x.pcie_gen_max or x.pcie_gen) and x.pcie_width), None)
    if g is not None and (rate := pcie_gbps(g.pcie_gen_max or g.pcie_gen, g.pcie_width)) is not None:
        return rate, f"the link rate: PCIe Gen{g.pcie_gen_max or g.pcie_gen} x{g.pcie_width} (nvidia-smi -q, GPU{gpu})"
    m = f.model
    if m is not None and (rate := pcie_gbps(m.pcie_gen, m.pcie_width)) is not None:
        return rate, f"the link rate: PCIe Gen{m.pcie_gen} x{m.pcie_width} (the GPU model table: {m.name})"
    return FLOOR_LINK
