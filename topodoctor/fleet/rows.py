"""A result as the fleet's history stores it: one row of plain values (what a parsing child can
hand over cheaply), its figures and counters packed as arrays, and the file's digest it is known by."""

from __future__ import annotations

import hashlib
import json
import time
from array import array
from dataclasses import dataclass
from typing import Any

from topodoctor.fleet.results import NodeResult


@dataclass(frozen=True)
class StoredRow:
    """One stored result as the history reads it (figures and counters still packed)."""

    node: str
    kind: str
    measured_at: float
    time_from: str
    state: str
    reason: str
    path: str
    node_type: int | None
    gpus: int | None
    finding_keys: str
    findings: str
    figure_keys: int | None
    figure_values: bytes | None
    counter_keys: int | None
    counter_values: bytes | None


def row_of(r: NodeResult, digest: bytes) -> tuple[Any, ...]:
    """A result as the store adds it (what ``Store.ingest`` takes): plain values only, so that a
    parsing child can hand it over cheaply; the shared names stay tuples until the store keeps them."""
    figures, counters = r.figures, r.counters
    # A finding's fix is its code's (topodoctor explain): kept once there, not in every row.
    findings = [(f.code, f.name, f.severity, f.subject, f.message) for f in r.findings]
    when = r.measured_at if r.measured_at is not None else time.time()
    return (
        digest,
        r.node,
        r.kind,
        when,
        r.time_from if r.measured_at is not None else "file",
        r.state,
        r.reason,
        r.path,
        (r.node_type.gpu_model, r.node_type.gpu_count, r.node_type.fabric) if r.node_type is not None else (),
        r.gpus,
        "\n".join(finding_key(f.severity, f.code, f.subject) for f in r.findings),
        json.dumps(findings) if findings else "",
        tuple((f.source, f.metric, f.subject, f.unit, f.better) for f in figures),
        array("d", [f.gbps for f in figures]).tobytes() if figures else None,
        tuple((c[0], c[1]) for c in counters),
        array("q", [c[2] for c in counters]).tobytes() if counters else None,
    )


def finding_key(severity: str, code: str, subject: str) -> str:
    """One finding as the compact list holds it: ``error TD101 GPU1/nvlink5``."""
    return f"{severity} {code} {subject}"


def file_digest(data: bytes) -> bytes:
    """What a result file is known by in the store: the BLAKE2b (128 bits) of its bytes."""
    return hashlib.blake2b(data, digest_size=16).digest()


def unpack_floats(data: bytes | None) -> array[float]:
    """A packed figure array as floats."""
    out = array("d")
    if data:
        out.frombytes(data)
    return out


def unpack_ints(data: bytes | None) -> array[int]:
    """A packed counter array as integers."""
    out = array("q")
    if data:
        out.frombytes(data)
    return out
