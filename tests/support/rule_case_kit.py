"""What the rule-case table (tests/rules/cases/) is written with: the Case record, the
cached sources, and small named edits of a snapshot, a bandwidth result or an environment.

What every case must hold, checked over the whole table and the whole registry
(tests/rules/test_rule_cases.py), so a new rule's cases are held to it without a word here:

- a firing case asserts the severity its findings carry: the one docs/rules.md documents for the
  rule unless the case names another (``severity=``, one the rule documents with ``also=``); a rule
  that grades by kind has a firing case for each severity it documents;
- every numeric threshold a rule module declares (a module-level ``UPPER_CASE`` number that a rule
  reads, itself or through the module's helpers) has a boundary pair: a firing case and a near
  miss that name it (``at="NAME"``), each so close to it that moving the threshold by 1 % (an
  integer by 1) turns its answer around; ``NOT_THRESHOLDS`` lists the numbers that are not.
"""

import ast
import copy
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from conftest import FIXTURES, ROOT, scenario_path

from topodoctor.core.codec import from_jsonable
from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.model.copies import BandwidthResult
from topodoctor.model.snapshot import Gpu, HostSnapshot
from topodoctor.probe.sources import probe_host
from topodoctor.topology.expect import Expectations, from_snapshot

SnapEdit = Callable[[HostSnapshot], HostSnapshot]
BwEdit = Callable[[dict[str, Any]], None]
BW_FULL = FIXTURES / "bandwidth" / "h200-x4.full.json"
NCCL_FILES = FIXTURES / "nccl"


@dataclass(frozen=True)
class Case:
    code: str
    fires: bool
    source: str  # a bundled recording or a derived scenario
    change: str = "as recorded"
    edit: SnapEdit | None = None
    env: dict[str, str] = field(default_factory=dict)
    expect_from: str | None = None  # expectations made from this source's snapshot
    bandwidth: BwEdit | None = None  # measured on the x4 host, then this edit
    process_cpus: tuple[int, ...] | None = None  # the checking process's CPU affinity
    subjects: tuple[str, ...] | None = None  # when it fires: exactly these subjects (sorted)
    collectives: str | None = None  # a derived collectives result (fixtures/collectives/derived), judged too
    fitness: str | None = None  # a derived fitness result (fixtures/fitness/derived), judged too
    severity: str | None = None  # when it fires: the severity of its findings, where the rule grades by kind
    at: str | None = None  # the threshold (a constant of the rule's module) this case sits at or just across
    gates_job: bool = False  # judged as a check that gates a job (a prolog, the job's scope)
    context: Callable[[Any], None] | None = None  # a last edit of the rules' Context (a measured result changed)

    @property
    def id(self) -> str:
        return f"{self.code}-{'fires' if self.fires else 'quiet'}-{self.source}-{self.change}"


def measured(ctx: Any, name: str) -> Any:
    """A measured input of the rules' Context (``collectives``, ``fitness``, ``collectives_expect_gbps``):
    a field of its own, or an entry of ``extra`` where the Context keeps it there."""
    return getattr(ctx, name) if name in getattr(ctx, "__dataclass_fields__", {}) else ctx.extra.get(name)


def set_measured(ctx: Any, name: str, value: Any) -> None:
    """Set a measured input of the rules' Context, where ``measured`` reads it."""
    if name in getattr(ctx, "__dataclass_fields__", {}):
        setattr(ctx, name, value)
    else:
        ctx.extra[name] = value


# ---------------------------------------------------------------- what a case is held to

# Module-level numbers that rules read but that are not thresholds of a verdict, and why.
NOT_THRESHOLDS = {
    "CONF_EVIDENCE_LINES": "how many bad lines of a config file the evidence quotes",
    "IDLE_BIT": "a bit of NVML's clock-event mask, not a limit",
}
# a rule's line (the other codes of the page, nccl-log's and the history's, have no tags)
_SEVERITY_LINE = re.compile(r"^- severity: (\w+)(?: \(by kind also ([\w, ]+)\))?; tags:", re.M)


@cache
def documented_severities() -> dict[str, tuple[str, frozenset[str]]]:
    """rule code -> (severity, the other severities it may grade by kind), as docs/rules.md documents them."""
    text = (ROOT / "docs" / "rules.md").read_text()
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for section in re.split(r"^### ", text, flags=re.M)[1:]:
        m = _SEVERITY_LINE.search(section)
        if m is not None:
            also = frozenset(a.strip() for a in (m.group(2) or "").split(",") if a.strip())
            out[section.split()[0]] = (m.group(1), also)
    return out


@cache
def _module_thresholds(module: str) -> tuple[dict[str, set[str]], set[str]]:
    """(function -> the names it reads, the module's numeric constants) of one rule module."""
    mod = sys.modules[module]
    tree = ast.parse(Path(mod.__file__ or "").read_text())
    numbers = {
        n.targets[0].id
        for n in tree.body
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and n.targets[0].id.isupper()
        and type(getattr(mod, n.targets[0].id, None)) in (int, float)
    } | {  # a threshold another rule module declares, imported by name
        a.asname or a.name
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("topodoctor.rules")
        for a in n.names
        if (a.asname or a.name).isupper() and type(getattr(mod, a.asname or a.name, None)) in (int, float)
    }
    reads = {
        n.name: {x.id for x in ast.walk(n) if isinstance(x, ast.Name)}
        for n in tree.body
        if isinstance(n, ast.FunctionDef)
    }
    return reads, numbers - set(NOT_THRESHOLDS)


def thresholds(func: Callable[..., Any]) -> set[str]:
    """The numeric thresholds a rule reads: its module's constants, read by the rule itself or by a
    helper of the same module it calls (at any depth)."""
    reads, numbers = _module_thresholds(func.__module__)
    seen: set[str] = set()
    todo = [func.__name__]
    while todo:
        name = todo.pop()
        if name in seen or name not in reads:
            continue
        seen.add(name)
        todo += [n for n in reads[name] if n in reads]
    return {n for f in seen for n in reads[f] if n in numbers}


@cache
def snapshot(source: str) -> HostSnapshot:
    path = scenario_path(source)
    return probe_host(str(path) if path.exists() else source).snapshot


@cache
def expectations(source: str) -> Expectations:
    return from_snapshot(snapshot(source))


def bandwidth_result(edit: BwEdit) -> BandwidthResult:
    data = copy.deepcopy(_bw_full())
    edit(data)
    return from_jsonable(BandwidthResult, data, "bandwidth result")


@cache
def _bw_full() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(BW_FULL.read_text())
    return data


# ---------------------------------------------------------------- small named edits


def gpu(i: int, **fields: Any) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(s, gpus=tuple(replace(g, **fields) if g.index == i else g for g in s.gpus))

    return edit


def pcie(i: int, **fields: Any) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        g = s.gpu(i)
        return gpu(i, pcie=replace(g.pcie, **fields))(s)

    return edit


def link(i: int, li: int, **fields: Any) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        g = s.gpu(i)
        links = tuple(replace(k, **fields) if k.link == li else k for k in g.nvlinks)
        return gpu(i, nvlinks=links)(s)

    return edit


def link_errors(i: int, li: int, **fields: Any) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        k = next(k for k in s.gpu(i).nvlinks if k.link == li)
        return link(i, li, errors=replace(k.errors, **fields))(s)

    return edit


def every_gpu(fn: Callable[[Gpu], Gpu]) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(s, gpus=tuple(fn(g) for g in s.gpus))

    return edit


def both(*edits: SnapEdit) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        for e in edits:
            s = e(s)
        return s

    return edit


def bridge_acs(bdf: str, acs: int) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(s, bridges=tuple(replace(b, acs_ctrl=acs) if b.bus_id == bdf else b for b in s.bridges))

    return edit


def bw_measure(mode: str, src: int, dst: int, scale: float = 1.0, **fields: Any) -> BwEdit:
    def edit(r: dict[str, Any]) -> None:
        m = next(m for m in r["measurements"] if (m["mode"], m["src"], m["dst"]) == (mode, src, dst))
        v = m["value"]
        for k in ("median", "min", "max"):
            v[k] *= scale
        v["samples"] = [x * scale for x in v["samples"]]
        m.update(fields)

    return edit


def bw_activity(index: int, **fields: Any) -> BwEdit:
    def edit(r: dict[str, Any]) -> None:
        next(a for a in r["activity"] if a["index"] == index).update(fields)

    return edit


def all_links_down(*indices: int) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        return every_gpu(
            lambda g: (
                replace(g, nvlinks=tuple(replace(k, active=False) for k in g.nvlinks)) if g.index in indices else g
            )
        )(s)

    return edit


def only_gpus(*indices: int) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        pairs = tuple(p for p in s.pairs if p.a in indices and p.b in indices)
        return replace(s, gpus=tuple(g for g in s.gpus if g.index in indices), pairs=pairs, gpu_count=len(indices))

    return edit


def pair_p2p(a: int, b: int, **fields: Any) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        pairs = tuple(
            replace(p, p2p=replace(p.p2p, **fields), p2p_reverse=replace(p.p2p_reverse, **fields))
            if (p.a, p.b) == (a, b)
            else p
            for p in s.pairs
        )
        return replace(s, pairs=pairs)

    return edit


def every_pair_p2p(**fields: Any) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        for p in s.pairs:
            s = pair_p2p(p.a, p.b, **fields)(s)
        return s

    return edit


def nics(**fields: Any) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(s, nics=tuple(replace(n, **fields) for n in s.nics))

    return edit


def host_error(call: str) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(s, probe_errors=(*s.probe_errors, ProbeError("EACCES", call)))

    return edit


FAILED = ProbeError("NO_PERMISSION", "nvmlDeviceGetPersistenceMode", 4)
NA = Unsupported("NOT_SUPPORTED")
