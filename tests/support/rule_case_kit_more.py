"""Helpers of the rule cases of the collectives (TD0xx) and kernel-log (TD52x) families, and TD620: the
helpers those cases are written with (the cases themselves are in tests/rules/cases/, by family).

Collectives cases judge the derived results of fixtures/derive_collectives.py (real nccl-tests and
NCCL runs on nvidia-h200-x2 with one documented change each); the unchanged run is every rule's near
miss. Kernel-log cases put real driver lines (fixtures/kernel-log/, sources named there) into the
h200-x4 recording's kernel log, on GPU2, as /dev/kmsg records."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

from conftest import FIXTURES
from rule_case_kit import Case, measured, set_measured

from topodoctor.model.collectives import CollectivesResult, load_result
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.kernel_log import read_kernel_events
from topodoctor.probe.replay import ReplaySysfs

COLLECTIVES = FIXTURES / "collectives" / "derived"
MULTINODE = FIXTURES / "collectives" / "multinode"
REAL = FIXTURES / "collectives" / "real"
KERNEL_LOG = FIXTURES / "kernel-log"
UPTIME_S = 700_000.0  # later than every dmesg time in the fixtures


@cache
def collectives_result(name: str) -> CollectivesResult:
    """A result: one host's derived (fixtures/collectives/derived), a multi-node run's derived
    (.../multinode), or a real one unchanged (.../real)."""
    path = next((d / f"{name}.json" for d in (COLLECTIVES, MULTINODE) if (d / f"{name}.json").exists()), None)
    return load_result(path or REAL / f"{name}.json")


def _kernel_log(  # type: ignore[no-untyped-def]
    name: str, gpu: int = 2, only: str | None = None, age_s: float | None = None, sub: tuple[str, str] | None = None
):
    """An edit: the host's kernel log holds the driver lines of fixtures/kernel-log/NAME (those with
    ``only`` in them, ``sub`` replaced), logged by GPU ``gpu``, the last of them ``age_s`` before the
    check (None: days before)."""

    def edit(snap: HostSnapshot) -> HostSnapshot:
        bus = str(snap.gpu(gpu).bus_id)[: -len(".0")]
        lines = [ln for ln in (KERNEL_LOG / name).read_text().splitlines() if "NVRM:" in ln]
        lines = [ln.replace(*sub) if sub else ln for ln in lines if only is None or only in ln]
        records = [
            f"4,{i},{int((500.0 + i) * 1e6)},-;"
            + re.sub(r"\(PCI:[0-9A-Fa-f:.]+", f"(PCI:{bus}", ln[ln.index("NVRM:") :])
            for i, ln in enumerate(lines)
        ]
        uptime = UPTIME_S if age_s is None else 500.0 + len(lines) - 1 + age_s
        fs = ReplaySysfs(
            [
                {"op": "read_records", "path": "/dev/kmsg", "result": records},
                {"op": "read", "path": "/proc/uptime", "result": f"{uptime} 0.0"},
            ],
            "rule case",
        )
        return replace(snap, kernel_events=read_kernel_events(fs))

    return edit


def _xid(code: str, log: str, xid: int, severity: str, age_s: float = 60.0, **kw: Any) -> Case:
    """A case of one Xid line of ``log``, logged ``age_s`` before the check (a minute: recent)."""
    return Case(
        code,
        True,
        "h200-x4",
        f"kernel log: Xid {xid} of {log}, {age_s:g} s ago{' (' + kw['sub'][1] + ')' if 'sub' in kw else ''}",
        _kernel_log(log, only=f"): {xid},", age_s=age_s, **{k: v for k, v in kw.items() if k != "at"}),
        severity=severity,
        at=kw.get("at"),
    )


def _collectives(edit: Callable[[CollectivesResult], CollectivesResult]) -> Callable[[Any], None]:
    """A context edit: its collectives result changed by ``edit``."""

    def change(ctx: Any) -> None:
        set_measured(ctx, "collectives", edit(measured(ctx, "collectives")))

    return change


def _failures_are(kind: str) -> Callable[[Any], None]:
    return _collectives(lambda r: replace(r, failures=tuple(replace(f, kind=kind) for f in r.failures)))


def _verdict_of(node: str, verdict: str) -> Callable[[Any], None]:
    def edit(r: CollectivesResult) -> CollectivesResult:
        assert r.pairwise is not None
        verdicts = tuple(replace(v, verdict=verdict) if v.node == node else v for v in r.pairwise.verdicts)
        return replace(r, pairwise=replace(r.pairwise, verdicts=verdicts))

    return _collectives(edit)


DAY_S = 24 * 3600.0  # the age past which an Xid counts as old (a warning at most)


_COLLECTIVE_CODES = [(s["name"], s["codes"]) for s in json.loads((COLLECTIVES / "index.json").read_text())]
_MULTINODE_CODES = [(s["name"], s["codes"]) for s in json.loads((MULTINODE / "index.json").read_text())]
# What each family's fixture log is, days old: a warning at most (info stays info).
_OLD = {
    c: "info" if c == "TD525" else "warning" for c in ("TD520", "TD521", "TD522", "TD523", "TD524", "TD525", "TD526")
}
_KERNEL = {
    "TD520": "fallen-off-bus.log",
    "TD521": "nvlink.log",
    "TD522": "ecc.log",
    "TD523": "row-remap.log",
    "TD524": "gsp.log",
    "TD525": "application.log",
    "TD526": "other.log",
}
