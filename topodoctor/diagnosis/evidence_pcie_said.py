"""A GPU the reporter's words put on a PCIe link narrower or older than the GPU's own (TD995): "GPU 1 on PCIe 2.0
x4", a card in a chipset slot or behind a riser. The GPU model (the table's PCIe generation and width) is what it is
held against; without a model it is only said."""

from __future__ import annotations

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.model.findings import Severity
from topodoctor.topology.gpu_models import MODELS, GpuModel
from topodoctor.topology.graph import PCIE_LANE_GBPS


def _model(f: Facts) -> GpuModel | None:
    return f.model or next((m for p in f.prose for m in MODELS if m.name == p.gpu_model and p.gpu_model), None)


def narrow_slot_findings(f: Facts) -> list[tuple[Severity, str, str, dict[str, object]]]:
    """(severity, subject, message, evidence) per GPU the sentences put on a link under its model's."""
    m = _model(f)
    out: list[tuple[Severity, str, str, dict[str, object]]] = []
    for p in f.prose:
        for gpu, gen, width in p.pcie_said:
            if m is None or (gen >= m.pcie_gen and width >= m.pcie_width):
                continue
            got, can = PCIE_LANE_GBPS[gen] * width, PCIE_LANE_GBPS.get(m.pcie_gen, 0.0) * m.pcie_width
            msg = (
                f"GPU {gpu} on a PCIe {gen}.0 x{width} link (the reporter's words), against the {m.name}'s PCIe "
                f"{m.pcie_gen}.0 x{m.pcie_width}: about {got:.1f} GB/s each way of {can:.0f}, so its host copies and "
                "peer traffic, and any group it joins, run at that narrow link's rate"
            )
            ev: dict[str, object] = {"gpu": gpu, "gen": gen, "width": width, "model": m.name,
                                     "lines": [f.where.get(p.piece, "the evidence")]}  # fmt: skip
            out.append(("warning", f"gpu:{gpu}", msg, ev))
    return out
