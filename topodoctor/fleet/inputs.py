"""Reading many nodes' result files for the fleet roll-up: bounded, and one bad file is one
line in the report, never the end of it.

Accepted documents (``kind`` and ``schema_version`` in each):

- ``check``: the JSON of ``topodoctor check --format json`` (its could-not-check answer too);
- ``bandwidth``: a ``topodoctor bandwidth`` result (``-o FILE``, or ``--format json``, which
  adds the node's TD7 findings);
- ``collectives``: a ``topodoctor collectives`` result of one node: ``host``, ``rows`` (read as
  ``measure.collectives.result.Row``), optional ``snapshot`` (for the node type) and
  ``findings``.

A node is named by the document's ``host``; a document without one (a check that could not
run) is named by its file name up to the first dot, so name result files ``NODE.KIND.json``.
``name_from="file"`` names every node so (Slurm's node names need not be host names).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from topodoctor.core import codec, fileio
from topodoctor.core.errors import InputError
from topodoctor.fleet.rollup import Figure, NodeResult, SourceState, Unreadable
from topodoctor.model.collective_rows import columns
from topodoctor.model.collectives import COLLECTIVES_SCHEMA_VERSION, Row
from topodoctor.model.copies import BANDWIDTH_SCHEMA_VERSION, BandwidthResult
from topodoctor.model.findings import Finding
from topodoctor.model.node_type import NodeType, node_type
from topodoctor.model.snapshot import HostSnapshot

MAX_RESULT_BYTES = 16 * fileio.MiB  # a bandwidth result with its snapshot is ~0.2 MB
NameFrom = Literal["host", "file"]


def bandwidth_figures(result: Any) -> tuple[Figure, ...]:
    """Copy bandwidths of a BandwidthResult as figures (latency is left out: too noisy to rank)."""
    out = []
    for m in result.measurements:
        if m.value is None or m.mode == "latency":
            continue
        if m.mode == "h2d":
            out.append(Figure("bandwidth", "h2d", f"host->GPU{m.dst}", m.value.median))
        elif m.mode == "d2h":
            out.append(Figure("bandwidth", "d2h", f"GPU{m.src}->host", m.value.median))
        else:
            out.append(Figure("bandwidth", m.mode, f"GPU{m.src}->GPU{m.dst}", m.value.median))
            if m.mode == "bidir" and m.reverse is not None:
                out.append(Figure("bandwidth", m.mode, f"GPU{m.dst}->GPU{m.src}", m.reverse.median))
    return tuple(out)


FLEET_FITNESS = ("hbm", "compute", "sm_copy")  # higher is better; latency is left out, as for copies


def fitness_figures(doc: Any, what: str) -> tuple[tuple[Figure, ...], NodeType | None]:
    """The measured HBM, compute and SM-copy figures of a check's ``fitness`` section (``check
    --level quick|long --format json``), and the node type it names."""
    if doc is None:
        return (), None
    try:
        ntype = doc.get("node_type")
        out = []
        for f in doc.get("figures", []):
            if f["kind"] in FLEET_FITNESS and f.get("value") is not None:
                where = {-1: "host"}
                src, dst = (where.get(int(x), f"GPU{int(x)}") for x in (f["src"], f["dst"]))
                subject = src if f["kind"] in ("hbm", "compute") else f"{src}->{dst}"
                label = " ".join([f["kind"], f["initiator"]] + (["bidir"] if f.get("bidir") else []))
                out.append(Figure("fitness", label, subject, float(f["value"]["median"])))
        node = NodeType(str(ntype["gpu_model"]), int(ntype["gpu_count"]), str(ntype["fabric"])) if ntype else None
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{what} does not match its schema: fitness: {type(exc).__name__}: {exc}") from None
    return tuple(out), node


def collective_figures(rows: Iterable[Row]) -> tuple[Figure, ...]:
    """busbw per op, size and placement: what nodes of one type should all reach."""
    return tuple(
        Figure("collectives", f"{r.op} busbw", f"{r.size_bytes} B" + (" in-place" if r.in_place else ""), r.busbw_gbps)
        for r in columns(rows)
    )


def _findings(data: Any, what: str) -> tuple[Finding, ...]:
    raw = data.get("findings") if isinstance(data, dict) else None
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError(f"{what} does not match its schema: findings: expected list")
    return tuple(codec.from_jsonable(Finding, f, f"{what} finding {i}") for i, f in enumerate(raw))


def _name(data: dict[str, Any], path: Path, name_from: NameFrom) -> str:
    host = data.get("host")
    if name_from == "host" and isinstance(host, str) and host.strip():
        return host.strip()
    return path.name.split(".", 1)[0]


def parse_result(data: Any, path: Path, name_from: NameFrom = "host") -> NodeResult:
    """One decoded document as a NodeResult; InputError naming the file when it is not one."""
    what = f"result {path}"
    if not isinstance(data, dict):
        raise InputError(f"{what} is not a topodoctor result (top level is not an object)")
    kind = data.get("kind")
    if kind == "check":
        codec.check_header(data, "check", 1, what)
        verdict = data.get("verdict")
        if verdict not in ("healthy", "unhealthy", "unknown"):
            raise InputError(f"{what} does not match its schema: verdict: expected healthy | unhealthy | unknown")
        state: SourceState = verdict
        figures, ntype = fitness_figures(data.get("fitness"), what)
        return NodeResult(
            _name(data, path, name_from),
            "check",
            str(path),
            state,
            str(data.get("reason", "")),
            _findings(data, what),
            figures,
            ntype,
        )
    if kind == "bandwidth":
        codec.check_header(data, "bandwidth", BANDWIDTH_SCHEMA_VERSION, what)
        r = codec.from_jsonable(BandwidthResult, data, what)
        findings = _findings(data, what)
        return NodeResult(
            _name(data, path, name_from),
            "bandwidth",
            str(path),
            "healthy" if "findings" in data else "measured",
            "",
            findings,
            bandwidth_figures(r),
            node_type(r.snapshot) if r.snapshot is not None else None,
        )
    if kind == "collectives":
        codec.check_header(data, "collectives", COLLECTIVES_SCHEMA_VERSION, what)
        rows = codec.from_jsonable(tuple[Row, ...], data.get("rows"), f"{what} rows")
        snap = data.get("snapshot")
        return NodeResult(
            _name(data, path, name_from),
            "collectives",
            str(path),
            "healthy" if "findings" in data else "measured",
            "",
            _findings(data, what),
            collective_figures(rows),
            node_type(codec.from_jsonable(HostSnapshot, snap, f"{what} snapshot")) if snap else None,
        )
    raise InputError(f"{what} is not a check, bandwidth or collectives result (kind={kind!r})")


def read_results(
    paths: Iterable[str | Path], name_from: NameFrom = "host", budget_s: float = 60.0
) -> tuple[list[NodeResult], list[Unreadable]]:
    """Read result files and directories (``*.json`` below them). Every failure is one
    ``Unreadable`` naming its file; past ``budget_s`` the files not yet read are listed so."""
    deadline = time.monotonic() + budget_s
    files: list[Path] = []
    bad: list[Unreadable] = []
    for p in paths:
        path = Path(p)
        try:
            if path.is_dir():
                files.extend(fileio.list_files(path, "results directory", ".json"))
            else:
                files.append(path)
        except InputError as exc:
            bad.append(Unreadable(str(path), str(exc)))
        except OSError as exc:  # is_dir() on a path we may not stat
            bad.append(Unreadable(str(path), f"cannot read {fileio.shown(path)}: {exc.strerror or type(exc).__name__}"))
    out: list[NodeResult] = []
    for path in dict.fromkeys(files):
        left = deadline - time.monotonic()
        guess = path.name.split(".", 1)[0]
        if left <= 0:
            spent = f"{path}: not read, the {budget_s:g} s budget for reading was spent"
            bad.append(Unreadable(str(path), spent, guess))
            continue
        try:
            data = fileio.read_json(path, "result", MAX_RESULT_BYTES, min(left, fileio.DEFAULT_TIMEOUT_S))
            out.append(parse_result(data, path, name_from))
        except InputError as exc:
            bad.append(Unreadable(str(path), str(exc), guess))
    return out, bad
