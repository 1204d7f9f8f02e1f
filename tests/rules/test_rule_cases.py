"""Every rule against its table of cases (tests/rules/cases/, by family): it fires where it must, with
the severity it documents, and stays silent on the near misses; every threshold has a pair of cases
at its edge that a nudge of the threshold turns around; a firing case's findings say what
tests/golden/rule-cases.json holds (message and evidence), regenerated where a change is meant. A
rule missing a firing case, a near miss, a case for each severity it documents, or a threshold's
pair fails the registry tests."""

from __future__ import annotations

import functools
import json
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rule_case_kit import Case, bandwidth_result, documented_severities, expectations, snapshot, thresholds
from rule_case_kit_measured import fitness_result
from rule_case_kit_more import collectives_result
from tests_support import judged

from tests.rules.cases import ALL_CASES, CASES
from topodoctor.model.findings import Finding
from topodoctor.probe.environment import capture_environment
from topodoctor.rules import REGISTRY, Context, evaluate
from topodoctor.topology.expect import with_fitness


def _findings(case: Case) -> list[tuple[str, str, str]]:
    return [(f.code, f.subject, f.severity) for f in _judge(case)]


def _judge(case: Case) -> list[Finding]:
    """What the rules find on the case's host, measurements and environment."""
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
    ctx.gates_job = case.gates_job
    if case.context is not None:
        case.context(ctx)
    return judged(evaluate(ctx))


WORDS = Path(__file__).resolve().parents[1] / "golden" / "rule-cases.json"
REWRITE = "PYTHONPATH=.:tests/support:tests python tests/rules/test_rule_cases.py --write"


def _said(case: Case) -> list[dict[str, Any]]:
    """The case's rule's findings as a user reads them: subject, severity, message, evidence, fix."""
    said = [
        {
            "subject": f.subject,
            "severity": f.severity,
            "message": f.message,
            "evidence": f.evidence,
            "fix": "(the rule's)" if f.fix == REGISTRY[f.code].fix else f.fix,  # a fix of its own, or the rule's
        }
        for f in _judge(case)
        if f.code == case.code
    ]
    text = json.dumps(said, default=str).replace(f"{WORDS.parents[2]}/", "")  # paths under the checkout: relative
    return json.loads(text)  # type: ignore[no-any-return]


@functools.cache
def _words() -> dict[str, Any]:
    return json.loads(WORDS.read_text())  # type: ignore[no-any-return]


def _graded(case: Case) -> bool:
    """Whether the case's rule grades its findings by kind (documents more than one severity)."""
    return bool(documented_severities()[case.code][1])


def _severity(case: Case) -> str:
    """The severity a firing case's findings must carry: the case's own, else the documented one."""
    return case.severity or documented_severities()[case.code][0]


@pytest.mark.parametrize("case", [c for c in ALL_CASES if c.source != "x4-nvml-hang"], ids=lambda c: c.id)
def test_case(case: Case) -> None:
    found = _findings(case)
    codes = {code for code, _, _ in found}
    if case.fires:
        assert case.code in codes, f"{case.code} did not fire: {case.change}"
        primary, also = documented_severities()[case.code]
        got = {sev for c, _, sev in found if c == case.code}
        if case.severity is None and also:  # a case of a rule that grades by kind, not told which kind
            assert got <= {primary, *also}, case.change
        else:
            assert got == {_severity(case)}, case.change
        if case.subjects is not None:
            assert tuple(sorted(s for c, s, _ in found if c == case.code)) == case.subjects
        # What it says, as well as that it fires: its message and evidence (the figures, their
        # rounding, the subject's spelling) as tests/golden/rule-cases.json holds them.
        assert case.id in _words(), f"no words recorded for {case.id}: {REWRITE}"
        assert _said(case) == _words()[case.id], f"{case.change} (if meant: {REWRITE})"
    else:
        assert case.code not in codes, f"{case.code} fired on a near miss: {case.change}"
    if case.severity is not None:  # a severity only where the rule documents it
        primary, also = documented_severities()[case.code]
        assert case.fires and case.severity in {primary, *also}, case.change


BOUNDARY = [c for c in ALL_CASES if c.at is not None]


def _answer(case: Case) -> frozenset[tuple[str, str]]:
    """What the case's rule says: each subject it names, with the severity."""
    return frozenset((s, sev) for c, s, sev in _findings(case) if c == case.code)


@pytest.mark.parametrize("case", BOUNDARY, ids=lambda c: f"{c.at}-{c.id}")
def test_a_boundary_case_turns_when_its_threshold_moves(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    """A case named for a threshold sits at it or just across: 1 % (an integer: 1) of movement one
    way or the other changes the rule's answer (whether it fires, or how severe), so both the
    threshold and the comparison with it are pinned."""
    assert case.at is not None
    module = sys.modules[REGISTRY[case.code].func.__module__]
    value = getattr(module, case.at)
    moved = (value - 1, value + 1) if isinstance(value, int) else (value * 0.99, value * 1.01)
    before = _answer(case)
    turned = []
    for v in moved:
        with monkeypatch.context() as m:
            m.setattr(module, case.at, v)
            turned.append(_answer(case) != before)
    assert any(turned), f"{case.at}={value} moved to {moved} leaves {case.change!r} as it was: not at the edge"


def _expected(case: Case) -> tuple[bool, str | None]:
    return case.fires, _severity(case) if case.fires else None


def test_every_threshold_has_a_boundary_pair() -> None:
    """Each threshold a rule reads has two cases at its edge that the rule answers differently (a
    firing case and a near miss, or two severities), under one of the rules that read it: a helper's
    threshold serves all its rules."""
    have: dict[tuple[str, str], set[tuple[bool, str | None]]] = defaultdict(set)
    for c in BOUNDARY:
        have[(REGISTRY[c.code].func.__module__, str(c.at))].add(_expected(c))
    lacking = sorted(
        f"{r.func.__module__}.{name} (read by {code})"
        for code, r in REGISTRY.items()
        for name in thresholds(r.func)
        if len(have[(r.func.__module__, name)]) < 2 or not any(f for f, _ in have[(r.func.__module__, name)])
    )
    assert lacking == [], "thresholds without a pair of cases at the edge (Case(..., at=NAME))"
    for c in BOUNDARY:
        assert c.at in thresholds(REGISTRY[c.code].func), f"{c.code} does not read {c.at}: {c.change}"


def test_every_severity_a_rule_documents_has_a_firing_case() -> None:
    """A rule that grades by kind shows each severity it documents in a case that names it (a case
    that names none is held only to the documented set): a severity no case reaches is either
    untested or not raised at all (then the rule should not document it)."""
    shown = {(c.code, _severity(c)) for c in ALL_CASES if c.fires and (c.severity or not _graded(c))}
    lacking = sorted(
        f"{code} {sev}"
        for code, (primary, also) in documented_severities().items()
        for sev in {primary, *also}
        if (code, sev) not in shown
    )
    assert lacking == [], "documented severities without a firing case naming them"


def test_the_documented_severities_are_the_registry_s() -> None:
    assert {code: (r.severity, r.also) for code, r in REGISTRY.items()} == documented_severities()


def test_every_rule_has_a_firing_case_and_a_near_miss() -> None:
    fires = {c.code for c in ALL_CASES if c.fires}
    quiet = {c.code for c in ALL_CASES if not c.fires}
    lacking = [
        f"{code} {r.name}: "
        + ", ".join(k for k, have in (("firing case", fires), ("near miss", quiet)) if code not in have)
        for code, r in sorted(REGISTRY.items())
        if code not in fires or code not in quiet
    ]
    assert lacking == [], "rules without cases in tests/rules/cases/"


def test_the_table_names_only_real_rules() -> None:
    assert {c.code for c in CASES} <= set(REGISTRY)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    # A change of what a rule says that is meant regenerates the file (and says why in its commit).
    firing = [c for c in ALL_CASES if c.fires and c.source != "x4-nvml-hang"]
    WORDS.write_text(json.dumps({c.id: _said(c) for c in firing}, indent=1, sort_keys=True) + "\n")
