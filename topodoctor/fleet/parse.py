"""One result document as the fleet reads it: its node, verdict, findings, figures, node type,
time, GPUs and counters.

Accepted documents (``kind`` and ``schema_version`` in each):

- ``check``: the JSON of ``topodoctor check --format json`` (its could-not-check answer too);
  a quick or long check's ``fitness`` section gives HBM, compute, SM copies and latency;
- ``bandwidth``: a ``topodoctor bandwidth`` result (``-o FILE``, or ``--format json`` with its TD7 findings);
- ``collectives``: a ``topodoctor collectives`` result of one node: ``host``, ``rows``, optional
  ``snapshot`` (for the node type) and ``findings``;
- ``fitness``: a fitness result on its own.

A node is named by the document's ``node`` (SLURMD_NODENAME where the result was made), else
its ``host``; a document with neither (an old check that could not run) by its file name up to
the first dot, so name result files ``NODE.KIND.json``. ``name_from="file"`` names every node so.

Read field by field, each checked as read (a mismatch: one line naming file and field): decoding a
bandwidth result's snapshot for its node type would cost a collector more than all else.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any, Literal, get_args

from topodoctor.core import codec
from topodoctor.core.errors import InputError
from topodoctor.fleet.results import NodeFigure, NodeResult, NodeType, SourceState
from topodoctor.model.collective_rows import columns
from topodoctor.model.collectives import COLLECTIVES_SCHEMA_VERSION, Row
from topodoctor.model.copies import BANDWIDTH_SCHEMA_VERSION, Mode
from topodoctor.model.findings import SEVERITY_ORDER, Finding
from topodoctor.model.fitness_results import FITNESS_SCHEMA_VERSION
from topodoctor.model.stamp import parse_iso

NameFrom = Literal["host", "file"]
MODES = get_args(Mode)  # the copy engine's oneway, bidir, latency, h2d, d2h; the SM kernel's sm_*
FLEET_FITNESS = ("hbm", "compute", "sm_copy", "latency")


class _Bad(Exception):
    """A field that does not fit: where, and what was expected."""


def _get(d: Any, key: str, where: str) -> Any:
    if not isinstance(d, dict):
        raise _Bad(f"{where}: expected an object")
    if key not in d:
        raise _Bad(f"{where}.{key}: missing")
    return d[key]


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise _Bad(f"{where}: expected a string")
    return v


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Bad(f"{where}: expected an integer")
    return v


def _num(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _Bad(f"{where}: expected a finite number")
    return float(v)


def _list(v: Any, where: str) -> list[Any]:
    if not isinstance(v, list):
        raise _Bad(f"{where}: expected a list")
    return v


def _type_of(names: Counter[str], count: int, links: int, switched: bool) -> NodeType:
    model = names.most_common(1)[0][0] if names else "unknown GPU"
    fabric = "PCIe only" if links == 0 else f"{links} NVLinks/GPU {'to NVSwitch' if switched else 'direct'}"
    return NodeType(model, count, fabric)


def node_type(snap: Any) -> NodeType:
    """GPU model, count and NVLink fabric of a HostSnapshot, from what does not change when a link fails.

    Link *counts* and where links lead stand for the fabric, not link states: a node with a
    link down is still of its type, and is compared with its peers for exactly that reason.
    """
    names = Counter(g.name for g in snap.gpus if isinstance(g.name, str))
    count = snap.gpu_count if isinstance(snap.gpu_count, int) else len(snap.gpus)
    links = max((g.nvlink_count for g in snap.gpus if isinstance(g.nvlink_count, int)), default=0)
    switched = bool(snap.nvswitches) or any(ln.remote_type == "switch" for g in snap.gpus for ln in g.nvlinks)
    return _type_of(names, count, links, switched)


def raw_node_type(snap: Any, where: str = "snapshot") -> NodeType:
    """``node_type`` of a snapshot as JSON holds it (probed values are plain, or marker objects)."""
    gpus = _list(_get(snap, "gpus", where), f"{where}.gpus")
    names: Counter[str] = Counter()
    links, switched = 0, bool(_list(snap.get("nvswitches", []), f"{where}.nvswitches"))
    for i, g in enumerate(gpus):
        if not isinstance(g, dict):
            raise _Bad(f"{where}.gpus[{i}]: expected an object")
        if isinstance(g.get("name"), str):
            names[g["name"]] += 1
        n = g.get("nvlink_count")
        if isinstance(n, int) and not isinstance(n, bool):
            links = max(links, n)
        switched = switched or any(
            isinstance(ln, dict) and ln.get("remote_type") == "switch" for ln in g.get("nvlinks") or []
        )
    count = snap.get("gpu_count")
    return _type_of(
        names, count if isinstance(count, int) and not isinstance(count, bool) else len(gpus), links, switched
    )


def _stats(v: Any, where: str) -> float | None:
    return None if v is None else _num(_get(v, "median", where), f"{where}.median")


def bandwidth_figures(measurements: Any, where: str = "measurements") -> tuple[NodeFigure, ...]:
    """Copy bandwidths and latencies of a bandwidth result's measurements (as JSON holds them)."""
    out = []
    for i, m in enumerate(_list(measurements, where)):
        at = f"{where}[{i}]"
        mode = _get(m, "mode", at)
        if mode not in MODES:
            raise _Bad(f"{at}.mode: expected one of {', '.join(MODES)}")
        src, dst = _int(_get(m, "src", at), f"{at}.src"), _int(_get(m, "dst", at), f"{at}.dst")
        value = _stats(_get(m, "value", at), f"{at}.value")
        if value is None:
            continue
        if mode in ("latency", "sm_latency"):
            out.append(NodeFigure("bandwidth", mode, f"GPU{src}->GPU{dst}", value, "us", "lower"))
        elif mode == "h2d":
            out.append(NodeFigure("bandwidth", "h2d", f"host->GPU{dst}", value))
        elif mode == "d2h":
            out.append(NodeFigure("bandwidth", "d2h", f"GPU{src}->host", value))
        else:
            out.append(NodeFigure("bandwidth", mode, f"GPU{src}->GPU{dst}", value))
            reverse = _stats(m.get("reverse"), f"{at}.reverse") if mode in ("bidir", "sm_bidir") else None
            if reverse is not None:
                out.append(NodeFigure("bandwidth", mode, f"GPU{dst}->GPU{src}", reverse))
    return tuple(out)


def fitness_figures(doc: Any, where: str = "fitness") -> tuple[tuple[NodeFigure, ...], NodeType | None]:
    """The measured HBM, compute, SM-copy and latency figures of a fitness result or a check's
    ``fitness`` section, and the node type it names."""
    if doc is None:
        return (), None
    ntype = doc.get("node_type") if isinstance(doc, dict) else None
    out = []
    for i, f in enumerate(_list(_get(doc, "figures", where), f"{where}.figures")):
        at = f"{where}.figures[{i}]"
        kind = _get(f, "kind", at)
        value = f.get("value")
        if kind not in FLEET_FITNESS or value is None:
            continue
        place = {-1: "host"}
        src, dst = (place.get(_int(_get(f, k, at), f"{at}.{k}"), f"GPU{f[k]}") for k in ("src", "dst"))
        subject = src if kind in ("hbm", "compute") else f"{src}->{dst}"
        label = " ".join(
            [kind, _str(_get(f, "initiator", at), f"{at}.initiator")] + (["bidir"] if f.get("bidir") else [])
        )
        median = _num(_get(value, "median", f"{at}.value"), f"{at}.value.median")
        unit = str(f.get("unit") or ("ns" if kind == "latency" else "GB/s"))
        out.append(NodeFigure("fitness", label, subject, median, unit, "lower" if kind == "latency" else "higher"))
    node = None
    if ntype is not None:
        w = f"{where}.node_type"
        node = NodeType(
            _str(_get(ntype, "gpu_model", w), f"{w}.gpu_model"),
            _int(_get(ntype, "gpu_count", w), f"{w}.gpu_count"),
            _str(_get(ntype, "fabric", w), f"{w}.fabric"),
        )
    return tuple(out), node


def collective_figures(rows: Any) -> tuple[NodeFigure, ...]:
    """busbw per op, size and placement: what nodes of one type should all reach."""
    return tuple(
        NodeFigure(
            "collectives", f"{r.op} busbw", f"{r.size_bytes} B" + (" in-place" if r.in_place else ""), r.busbw_gbps
        )
        for r in columns(rows)
    )


def _findings(data: dict[str, Any]) -> tuple[Finding, ...]:
    raw = data.get("findings")
    if raw is None:
        return ()
    try:
        return _fast_findings(raw)
    except (_Bad, KeyError, TypeError, AttributeError):
        pass  # the checked reading below names what is wrong
    out = []
    for i, f in enumerate(_list(raw, "findings")):
        at = f"findings[{i}]"
        severity = _get(f, "severity", at)
        if severity not in SEVERITY_ORDER:
            raise _Bad(f"{at}.severity: expected info | warning | error | critical")
        evidence = f.get("evidence", {})
        if not isinstance(evidence, dict):
            raise _Bad(f"{at}.evidence: expected an object")
        by = tuple(_str(c, f"{at}.caused_by[]") for c in _list(f.get("caused_by", []), f"{at}.caused_by"))
        out.append(
            Finding(
                _str(_get(f, "code", at), f"{at}.code"),
                _str(_get(f, "name", at), f"{at}.name"),
                severity,
                _str(_get(f, "subject", at), f"{at}.subject"),
                _str(_get(f, "message", at), f"{at}.message"),
                _str(f.get("fix", ""), f"{at}.fix"),
                evidence,
                caused_by=by,
            )
        )
    return tuple(out)


def _stamp(data: dict[str, Any], mtime: float | None) -> dict[str, Any]:
    """measured_at (else the file's mtime, said so), GPUs and counters, where the document has them."""
    at = data.get("measured_at")
    out: dict[str, Any] = {}
    if at is not None:
        try:
            out["measured_at"] = parse_iso(_str(at, "measured_at"))
        except ValueError:
            raise _Bad("measured_at: expected an ISO 8601 time") from None
    elif mtime is not None:
        out["measured_at"], out["time_from"] = mtime, "file"
    gpus = []
    for i, g in enumerate(_list(data.get("gpu_ids", []), "gpu_ids")):
        at = f"gpu_ids[{i}]"
        uuid, serial, bus = (
            g.get(k) if isinstance(_get(g, k, at), str) else None for k in ("uuid", "serial", "bus_id")
        )
        gpus.append((_int(_get(g, "index", at), f"{at}.index"), uuid, serial, bus))
    readings = []
    for i, r in enumerate(_list(data.get("counters", []), "counters")):
        at = f"counters[{i}]"
        readings.append(
            (
                _str(_get(r, "subject", at), f"{at}.subject"),
                _str(_get(r, "counter", at), f"{at}.counter"),
                _int(_get(r, "value", at), f"{at}.value"),
            )
        )
    out["gpus"], out["counters"] = tuple(gpus), tuple(readings)
    return out


# The fast paths: the same reading as the checked functions above, with no message built while
# all is well. Anything they do not like sends the document through the checked function,
# which names the field; a document both accept reads the same either way.
_SHAPES: dict[tuple[Any, ...], tuple[str, str, str, str]] = {}  # a fitness figure's names, by its coordinates
_STR, _INT = str, int


def _fast_findings(raw: Any) -> tuple[Finding, ...]:
    out = []
    for f in raw:
        sev, fix, ev = f["severity"], f.get("fix", ""), f.get("evidence", {})
        raw_by = f.get("caused_by", [])
        if type(raw_by) is not list:
            raise _Bad("")
        by = tuple(raw_by)
        got = Finding(f["code"], f["name"], sev, f["subject"], f["message"], fix, ev, caused_by=by)
        if (
            sev not in SEVERITY_ORDER
            or type(got.code) is not _STR
            or type(got.name) is not _STR
            or type(got.subject) is not _STR
            or type(got.message) is not _STR
            or type(fix) is not _STR
            or type(ev) is not dict
            or any(type(c) is not _STR for c in by)
        ):
            raise _Bad("")
        out.append(got)
    return tuple(out)


def _fast_fitness(doc: Any) -> tuple[tuple[NodeFigure, ...], NodeType | None]:
    out = []
    for f in doc["figures"]:
        kind, value = f["kind"], f.get("value")
        if kind not in FLEET_FITNESS or value is None:
            continue
        coords = (kind, f["initiator"], f["src"], f["dst"], bool(f.get("bidir")), f.get("unit"))
        shape = _SHAPES.get(coords)
        if shape is None:
            (label, subject, unit, better), _ = _shape(f)
            shape = _SHAPES[coords] = (label, subject, unit, better)
        median = value["median"]
        if (type(median) is not float and type(median) is not _INT) or median != median or median in (_INF, -_INF):
            raise _Bad("")
        out.append(NodeFigure("fitness", shape[0], shape[1], float(median), shape[2], shape[3]))  # type: ignore[arg-type]
    ntype = doc.get("node_type")
    node = None
    if ntype is not None:
        node = NodeType(ntype["gpu_model"], ntype["gpu_count"], ntype["fabric"])
        if type(node.gpu_model) is not _STR or type(node.gpu_count) is not _INT or type(node.fabric) is not _STR:
            raise _Bad("")
    return tuple(out), node


_INF = float("inf")


def _shape(f: dict[str, Any]) -> tuple[tuple[str, str, str, str], None]:
    """A fitness figure's label, subject, unit and better side, checked (cached by the fast path)."""
    figures, _ = fitness_figures({"figures": [{**f, "value": {"median": 1.0}}]}, "")
    g = figures[0]
    return (g.metric, g.subject, g.unit, g.better), None


def _fast_stamp(data: dict[str, Any], mtime: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    at = data.get("measured_at")
    if at is not None:
        out["measured_at"] = parse_iso(at)
    elif mtime is not None:
        out["measured_at"], out["time_from"] = mtime, "file"
    gpus = tuple((g["index"], g["uuid"], g["serial"], g["bus_id"]) for g in data.get("gpu_ids", ()))
    for g in gpus:
        if type(g[0]) is not _INT or any(v is not None and type(v) is not _STR for v in g[1:]):
            raise _Bad("")
    counters = tuple((r["subject"], r["counter"], r["value"]) for r in data.get("counters", ()))
    for c in counters:
        if type(c[2]) is not _INT or type(c[0]) is not _STR or type(c[1]) is not _STR:
            raise _Bad("")
    out["gpus"], out["counters"] = gpus, counters
    return out


def _either(fast: Any, checked: Any, *args: Any) -> Any:
    """``fast(*args)``, or where it balks, ``checked(*args)``: the same answer, or the message."""
    try:
        return fast(*args)
    except (_Bad, KeyError, TypeError, ValueError, AttributeError, IndexError):
        return checked(*args)


def _name(data: dict[str, Any], path: Path, name_from: NameFrom) -> str:
    if name_from == "host":
        for key in ("node", "host"):
            v = data.get(key)
            if isinstance(v, str) and v.strip():
                return v.strip()
    return path.name.split(".", 1)[0]


def parse_result(data: Any, path: Path, name_from: NameFrom = "host", mtime: float | None = None) -> NodeResult:
    """One decoded document as a NodeResult; InputError naming the file when it is not one.
    ``mtime``: the file's modification time, the result's time when it carries none."""
    what = f"result {path}"
    if not isinstance(data, dict):
        raise InputError(f"{what} is not a topodoctor result (top level is not an object)")
    kind = data.get("kind")
    try:
        if kind == "check":
            codec.check_header(data, "check", 1, what)
            verdict = data.get("verdict")
            if verdict not in ("healthy", "unhealthy", "unknown"):
                raise _Bad("verdict: expected healthy | unhealthy | unknown")
            state: SourceState = verdict
            fit = data.get("fitness")
            figures, ntype = _either(_fast_fitness, fitness_figures, fit) if fit is not None else ((), None)
            reason = data.get("reason", "")
            body = (str(reason), _findings(data), figures, ntype)
        elif kind == "bandwidth":
            codec.check_header(data, "bandwidth", BANDWIDTH_SCHEMA_VERSION, what)
            figures = bandwidth_figures(_get(data, "measurements", ""))
            snap = data.get("snapshot")
            state = "healthy" if "findings" in data else "measured"
            body = ("", _findings(data), figures, raw_node_type(snap) if snap is not None else None)
        elif kind == "collectives":
            codec.check_header(data, "collectives", COLLECTIVES_SCHEMA_VERSION, what)
            rows = codec.from_jsonable(tuple[Row, ...], data.get("rows"), f"{what} rows")
            snap = data.get("snapshot")
            state = "healthy" if "findings" in data else "measured"
            body = ("", _findings(data), collective_figures(rows), raw_node_type(snap) if snap else None)
        elif kind == "fitness":
            codec.check_header(data, "fitness", FITNESS_SCHEMA_VERSION, what)
            figures, ntype = fitness_figures(data, "")
            body = ("", (), figures, ntype)
            state = "measured"
        else:
            raise InputError(f"{what} is not a check, bandwidth, collectives or fitness result (kind={kind!r})")
        stamp = _either(_fast_stamp, _stamp, data, mtime)
    except _Bad as exc:
        raise InputError(f"{what} does not match its schema: {str(exc).lstrip('.')}") from None
    reason, findings, figures, ntype = body
    return NodeResult(_name(data, path, name_from), kind, str(path), state, reason, findings, figures, ntype, **stamp)
