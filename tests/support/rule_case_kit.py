"""What the rule-case table (tests/support/rule_cases.py) is written with: the Case record, the
cached sources, and small named edits of a snapshot, a bandwidth result or an environment."""

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from conftest import FIXTURES, scenario_path

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

    @property
    def id(self) -> str:
        return f"{self.code}-{'fires' if self.fires else 'quiet'}-{self.source}-{self.change}"


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
