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
from dataclasses import replace
from functools import cache

from conftest import FIXTURES
from rule_case_kit import Case

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


def _kernel_log(name: str, gpu: int = 2):  # type: ignore[no-untyped-def]
    """An edit: the host's kernel log holds the driver lines of fixtures/kernel-log/NAME, logged by GPU ``gpu``."""

    def edit(snap: HostSnapshot) -> HostSnapshot:
        bus = str(snap.gpu(gpu).bus_id)[: -len(".0")]
        lines = [ln for ln in (KERNEL_LOG / name).read_text().splitlines() if "NVRM:" in ln]
        records = [
            f"4,{i},{int((500.0 + i) * 1e6)},-;"
            + re.sub(r"\(PCI:[0-9A-Fa-f:.]+", f"(PCI:{bus}", ln[ln.index("NVRM:") :])
            for i, ln in enumerate(lines)
        ]
        fs = ReplaySysfs(
            [
                {"op": "read_records", "path": "/dev/kmsg", "result": records},
                {"op": "read", "path": "/proc/uptime", "result": f"{UPTIME_S} 0.0"},
            ],
            "rule case",
        )
        return replace(snap, kernel_events=read_kernel_events(fs))

    return edit


_COLLECTIVE_CODES = [(s["name"], s["codes"]) for s in json.loads((COLLECTIVES / "index.json").read_text())]
_MULTINODE_CODES = [(s["name"], s["codes"]) for s in json.loads((MULTINODE / "index.json").read_text())]
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
    *(Case(code, True, "h200-x4", f"kernel log: {log} on GPU2", _kernel_log(log)) for code, log in _KERNEL.items()),
    *(
        Case(code, False, "h200-x4", "kernel log: NVRM lines that are not Xid events", _kernel_log("not-xid.log"))
        for code in _KERNEL
    ),
    Case("TD620", True, "h200-x4", "NCCL_P2P_DISABLE=true (strtoll reads 0)", env={"NCCL_P2P_DISABLE": "true"}),
    Case("TD620", False, "h200-x4", "NCCL_P2P_DISABLE=1", env={"NCCL_P2P_DISABLE": "1"}),
]
