"""Rule cases of the collectives (TD0xx) and kernel-log (TD52x) families, and TD620: part of the
table in tests/support/rule_cases.py.

Collectives cases judge the derived results of fixtures/derive_collectives.py (real nccl-tests
and NCCL runs on nvidia-h200-x2 with one documented change each); the unchanged run is every
rule's near miss. Kernel-log cases put real driver lines (fixtures/kernel-log/, sources named
there) into the h200-x4 recording's kernel log, on GPU2, as /dev/kmsg records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

from conftest import FIXTURES
from rule_case_kit import Case, measured, set_measured
from rule_cases_edges import EDGE_CASES
from rule_cases_variants import VARIANT_CASES

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
# Each Xid family by kind, recent: the severity the kind names, then the same kind old.
KERNEL_CASES = [
    _xid("TD520", "fallen-off-bus.log", 79, "critical"),
    _xid("TD520", "fallen-off-bus.log", 79, "critical", DAY_S, at="RECENT_S"),  # a day to the second: still recent
    _xid("TD520", "fallen-off-bus.log", 79, "warning", DAY_S + 1, at="RECENT_S"),  # a second older: a warning
    _xid("TD521", "nvlink.log", 74, "error"),
    _xid("TD521", "nvlink.log", 149, "error"),  # "Fatal" in its text
    _xid("TD521", "nvlink.log", 144, "warning"),  # "Nonfatal"
    _xid("TD521", "nvlink.log", 144, "error", sub=("Nonfatal", "Fatal")),
    Case(
        "TD521",
        True,
        "h200-x4",
        "kernel log: all of nvlink.log, recent",
        _kernel_log("nvlink.log", age_s=60.0),
        severity="error",
    ),
    _xid("TD522", "ecc.log", 48, "error"),
    _xid("TD522", "ecc.log", 94, "warning"),  # contained
    _xid("TD522", "ecc.log", 95, "error"),
    _xid("TD523", "row-remap.log", 63, "warning"),
    _xid("TD523", "row-remap.log", 64, "error"),
    _xid("TD524", "gsp.log", 119, "error"),
    _xid("TD524", "gsp.log", 120, "warning", DAY_S + 1),
    _xid("TD525", "application.log", 31, "info"),
    _xid("TD526", "other.log", 154, "error"),  # "(GPU Reset Required)"
    _xid("TD526", "other.log", 154, "error", sub=("GPU Reset Required", "Node Reboot Required")),
    _xid("TD526", "other.log", 154, "warning", sub=("GPU Reset Required", "None")),
    _xid("TD526", "other.log", 62, "warning"),
    Case("TD526", False, "h200-x4", "kernel log: only known Xids, recent", _kernel_log("ecc.log", age_s=60.0)),
    Case("TD521", False, "h200-x4", "kernel log: Xid 94 and 95, recent (TD522)", _kernel_log("ecc.log", age_s=60.0)),
]


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

MORE_CASES: list[Case] = [
    *(
        Case(code, True, "h200-x2", f"collectives result {name}", collectives=name)
        for name, codes in _COLLECTIVE_CODES
        for code in codes
    ),
    *(
        Case(f"TD00{i}", False, "h200-x2", "collectives result x2-healthy (the real run)", collectives="x2-healthy")
        for i in range(1, 8)
    ),
    Case(
        "TD020",
        False,
        "h200-x2",
        "collectives result x2-healthy (the real run: 0.89-1.02 of the model at 512 MiB)",
        collectives="x2-healthy",
    ),
    *(
        Case(code, True, "h200-x2", f"multi-node result {name}", collectives=name)
        for name, codes in _MULTINODE_CODES
        for code in codes
    ),
    *(
        Case(code, False, "h200-x2", f"multi-node result {name} (healthy)", collectives=name)
        for name in ("hgx-2nodes-healthy", "hgx-4nodes-pairwise-healthy")
        for code in ("TD010", "TD011", "TD012", "TD013")
    ),
    Case(
        "TD003",
        False,
        "h200-x2",
        "real run: four simulated nodes on one host, NET/Socket between NVLink-connected GPUs of different nodes",
        collectives="x2-four-simulated-nodes",
    ),
    Case("TD210", True, "pcie-2socket", "GPU4/GPU5: nearest RDMA NIC across the socket link"),
    Case("TD210", False, "hgx-8gpu-2socket", "every GPU with a NIC under its own PCIe switch"),
    *(
        Case(code, True, "h200-x4", f"kernel log: {log} on GPU2", _kernel_log(log), severity=_OLD[code])
        for code, log in _KERNEL.items()
    ),
    *KERNEL_CASES,
    *EDGE_CASES,  # at and across each threshold (tests/support/rule_cases_edges.py)
    *VARIANT_CASES,  # the spellings of names and states (tests/support/rule_cases_variants.py)
    Case(
        "TD005",
        True,
        "h200-x2",
        "x2-hang's failures out of memory",
        collectives="x2-hang",
        context=_failures_are("oom"),
        severity="warning",
    ),
    Case("TD005", True, "h200-x2", "x2-hang's failures as they are", collectives="x2-hang", severity="error"),
    Case(
        "TD010",
        True,
        "h200-x2",
        "nodeC slow in both rounds",
        collectives="hgx-4nodes-pairwise-slow",
        severity="error",
        subjects=("node:nodeC",),
    ),
    Case(
        "TD010",
        True,
        "h200-x2",
        "nodeC could not be re-paired (undetermined)",
        collectives="hgx-4nodes-pairwise-slow",
        context=_verdict_of("nodeC", "undetermined"),
        severity="warning",
        subjects=("node:nodeC",),
    ),
    Case(
        "TD511",
        True,
        "x4-foreign-processes",
        "a previous job's processes on GPU1, in a check that gates a job",
        gates_job=True,
        severity="error",
        subjects=("GPU1",),
    ),
    Case(
        "TD608",
        True,
        "h200-x4",
        "NCCL_TOPO_FILE with a link speed NCCL does not know (30.0 GT/s)",
        env={"NCCL_TOPO_FILE": str(FIXTURES / "nccl" / "topo-x4-speed.xml")},
        severity="warning",
    ),
    *(
        Case(code, False, "h200-x4", "kernel log: NVRM lines that are not Xid events", _kernel_log("not-xid.log"))
        for code in _KERNEL
    ),
    Case("TD620", True, "h200-x4", "NCCL_P2P_DISABLE=true (strtoll reads 0)", env={"NCCL_P2P_DISABLE": "true"}),
    Case("TD620", False, "h200-x4", "NCCL_P2P_DISABLE=1", env={"NCCL_P2P_DISABLE": "1"}),
]
