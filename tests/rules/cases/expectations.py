"""The rule cases of expectations (TD8xx):
for every rule of the family, cases where it must fire and near misses where it must stay silent,
thresholds and spellings included (tests/rules/test_rule_cases.py holds the table to the registry)."""

from __future__ import annotations

from rule_case_kit import Case, host_error, nics
from rule_case_kit_disagreeing import _expecting

from topodoctor.core.probed import ProbeError

CASES = [
    # expectations
    Case("TD801", True, "h200-x2", "2 GPUs where the x4 node type has 4", expect_from="h200-x4"),
    Case("TD801", False, "h200-x4", "the node type's own host", expect_from="h200-x4"),
    Case("TD802", True, "h100-x1", "an H100 where the node type has H200", expect_from="h200-x4"),
    Case("TD802", False, "h200-x2", "H200 as the node type says (count aside)", expect_from="h200-x4"),
    Case("TD803", True, "h200-x4", "no RDMA NIC where the HGX node type has 8", expect_from="hgx-8gpu-2socket"),
    Case("TD803", False, "hgx-8gpu-2socket", "every RDMA NIC present and active", expect_from="hgx-8gpu-2socket"),
    Case(
        "TD803",
        False,
        "h200-x4",
        "RDMA devices could not be listed (TD901)",
        host_error("list /sys/class/infiniband"),
        expect_from="hgx-8gpu-2socket",
    ),
    Case("TD803", True, "hgx-8gpu-2socket", "every port DOWN", nics(state="DOWN"), expect_from="hgx-8gpu-2socket"),
    Case(
        "TD803",
        False,
        "hgx-8gpu-2socket",
        "port state unreadable (TD901)",
        nics(state=ProbeError("EACCES", "read state")),
        expect_from="hgx-8gpu-2socket",
    ),
    # more GPUs than the node type has is a mismatch too, not only fewer
    Case("TD801", True, "h200-x4", "4 GPUs where the x2 node type has 2", expect_from="h200-x2"),
    # a port between DOWN and ACTIVE (the IB port states INIT, ARMED; the physical state POLLING)
    *[
        Case(
            "TD803", True, "hgx-8gpu-2socket", f"every port {state}", nics(state=state), expect_from="hgx-8gpu-2socket"
        )
        for state in ("INIT", "ARMED", "POLLING")
    ],
    Case(
        "TD803",
        False,
        "hgx-8gpu-2socket",
        "every port 'active', as a lower-case reader writes it",
        nics(state="active"),
        expect_from="hgx-8gpu-2socket",
    ),
]

# the file asking for less than the host has, or naming nothing: no shortfall
CASES += [
    Case(
        "TD802",
        False,
        "h100-x1",
        "an H100 where the node type's file names no model",
        expect_from="h200-x4",
        context=_expecting(gpu_model=""),
    ),
    Case(
        "TD101",
        False,
        "h200-x4",
        "18 links up where the file asks 17 a GPU",
        expect_from="h200-x4",
        context=_expecting(nvlinks_per_gpu=17),
    ),
    Case(
        "TD102",
        False,
        "h200-x4",
        "18 links a pair where the file asks 17",
        expect_from="h200-x4",
        context=_expecting(nvlinks_per_pair=17),
    ),
    Case(
        "TD203",
        False,
        "h200-x4",
        "x16 links where the file asks x8",
        expect_from="h200-x4",
        context=_expecting(pcie_width=8),
    ),
    Case(
        "TD204",
        False,
        "h200-x4",
        "Gen5 links where the file asks Gen4",
        expect_from="h200-x4",
        context=_expecting(pcie_gen=4),
    ),
]
