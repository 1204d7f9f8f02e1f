"""The table of rule cases, by family (one module a family: collectives, nvlink, pcie, p2p, numa,
fabric_health, nccl_cuda_env, bandwidth, expectations, probe, evidence): for every rule, cases where it must
fire and near misses where it must stay silent, thresholds included. Coverage is computed from this
table (and from the derived scenarios, whose index lists the codes each must raise): a rule
without a firing case or without a near miss fails tests/rules/test_rule_cases.py.

A case starts from a real recording or a derived scenario (fixtures/derive.py) and may apply
one small, named edit to its snapshot, its bandwidth result or the process environment; the
edits and helpers the families share are in tests/support/rule_case_kit*.py.
"""

from __future__ import annotations

import json

from conftest import BW_DERIVED, DERIVED, FIXTURES
from rule_case_kit import Case

from tests.rules.cases import (
    bandwidth,
    collectives,
    evidence,
    expectations,
    fabric_health,
    nccl_cuda_env,
    numa,
    nvlink,
    p2p,
    pcie,
    probe,
)

FAMILIES = (
    collectives,
    nvlink,
    pcie,
    p2p,
    numa,
    fabric_health,
    nccl_cuda_env,
    bandwidth,
    expectations,
    probe,
    evidence,
)
CASES: list[Case] = [c for family in FAMILIES for c in family.CASES]

# Each derived scenario raises exactly the codes its index lists: those are firing cases too.
SCENARIO_CASES = [Case(code, True, s["name"], s["change"]) for s in DERIVED for code in s["codes"]]
BW_SCENARIO_CASES = [
    Case(
        code,
        True,
        "h200-x4",
        s["change"],
        bandwidth=lambda r, n=s["file"]: r.update(json.loads((FIXTURES / "bandwidth" / "derived" / n).read_text())),
    )
    for s in BW_DERIVED
    for code in s["codes"]
]
ALL_CASES = CASES + SCENARIO_CASES + BW_SCENARIO_CASES
