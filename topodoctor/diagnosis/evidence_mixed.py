"""GPUs of different models on one host (TD994), as a tool's listing (nvidia-smi, nccl-tests' device lines) or the
reporter's list of the rig's parts shows them: a group that spans them waits for the slower at every collective."""

from __future__ import annotations

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.model.findings import Severity
from topodoctor.topology.gpu_models import model_of


def _plain(name: str) -> str:
    return " ".join(name.replace("NVIDIA", "").replace("GeForce", "").split())


def _model(name: str) -> str:
    """The model a name stands for: its entry in the model table, else the name itself (a GT 710 is not in it)."""
    m = model_of(name)
    return m.name if m is not None else _plain(name)


def mixed_findings(f: Facts) -> list[tuple[Severity, str, str, dict[str, object]]]:
    """(severity, subject, message, evidence) when one host shows GPUs of two models or more: a warning where the
    reporter says the run is slow or states its figures, else said as information."""
    by_host: dict[str, dict[str, list[str]]] = {}
    written: dict[str, str] = {}  # model -> the first name it was written as ("RTX 3090 Ti", not the table's row)
    where: dict[str, set[str]] = {}
    seen = [(g.host, g.index, g.name, g.piece) for g in f.gpus if g.name]
    seen += [("", index, name, said.piece) for said in f.prose for index, name in said.listed]
    for host, index, name, piece in seen:
        gpus = by_host.setdefault(host, {}).setdefault(_model(name), [])
        written.setdefault(_model(name), _plain(name))
        if f"GPU {index}" not in gpus:
            gpus.append(f"GPU {index}")
        where.setdefault(host, set()).add(f.where.get(piece, "the evidence"))
    out: list[tuple[Severity, str, str, dict[str, object]]] = []
    for host, models in sorted(by_host.items()):
        if len(models) < 2 or not all(models.values()):
            continue
        shown = ", ".join(f"{written[m]} ({', '.join(gpus)})" for m, gpus in models.items())
        on = f" on {host}" if host else " on one host"
        msg = (
            f"mixed GPU models{on}: {shown}; a tensor-parallel group or a collective over them runs at the slowest "
            "GPU's pace, the faster ones waiting for it at every all-reduce"
        )
        slow = any(p.slow or p.figures for p in f.prose) or bool(f.measured)
        ev: dict[str, object] = {"models": {written[m]: g for m, g in models.items()},
                                 "host": host, "lines": sorted(where.get(host, set()))}  # fmt: skip
        out.append(("warning" if slow else "info", f"host:{host}" if host else "gpus", msg, ev))
    return out
