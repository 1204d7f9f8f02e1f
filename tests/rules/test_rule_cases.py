"""Every rule against its table of cases (tests/support/rule_cases.py): it fires where it must and
stays silent on the near misses; a rule missing either kind of case fails the registry test."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rule_case_kit import Case, bandwidth_result, expectations, snapshot
from rule_cases import ALL_CASES, CASES
from rule_cases_measured import fitness_result
from rule_cases_more import collectives_result
from tests_support import judged

from topodoctor.probe.environment import capture_environment
from topodoctor.rules import REGISTRY, Context, evaluate
from topodoctor.topology.expect import with_fitness


def _findings(case: Case) -> list[tuple[str, str]]:
    snap = snapshot(case.source)
    if case.edit is not None:
        snap = case.edit(snap)
    env = replace(capture_environment(case.env, system_conf="/nonexistent"), process_cpus=case.process_cpus)
    bw = bandwidth_result(case.bandwidth) if case.bandwidth is not None else None
    if bw is not None:
        snap = bw.snapshot or snap
    exp = expectations(case.expect_from) if case.expect_from else None
    ctx = Context(snap, env, expect=exp, bandwidth=bw)
    if case.collectives is not None:
        res = collectives_result(case.collectives)
        ctx = Context(res.snapshot or snap, env, expect=exp, bandwidth=bw, collectives=res)
    if case.fitness is not None:
        ctx.fitness = fitness_result(case.fitness)
        if ctx.expect is not None:  # the file a known-good host of the type wrote: the healthy base
            ctx.expect = with_fitness(ctx.expect, fitness_result("healthy"))
    return [(f.code, f.subject) for f in judged(evaluate(ctx))]


@pytest.mark.parametrize("case", [c for c in ALL_CASES if c.source != "x4-nvml-hang"], ids=lambda c: c.id)
def test_case(case: Case) -> None:
    found = _findings(case)
    codes = {code for code, _ in found}
    if case.fires:
        assert case.code in codes, f"{case.code} did not fire: {case.change}"
        if case.subjects is not None:
            assert tuple(sorted(s for c, s in found if c == case.code)) == case.subjects
    else:
        assert case.code not in codes, f"{case.code} fired on a near miss: {case.change}"


def test_every_rule_has_a_firing_case_and_a_near_miss() -> None:
    fires = {c.code for c in ALL_CASES if c.fires}
    quiet = {c.code for c in ALL_CASES if not c.fires}
    lacking = [
        f"{code} {r.name}: "
        + ", ".join(k for k, have in (("firing case", fires), ("near miss", quiet)) if code not in have)
        for code, r in sorted(REGISTRY.items())
        if code not in fires or code not in quiet
    ]
    assert lacking == [], "rules without cases in tests/support/rule_cases.py"


def test_the_table_names_only_real_rules() -> None:
    assert {c.code for c in CASES} <= set(REGISTRY)
