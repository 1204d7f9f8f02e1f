"""The development (fixtures/nccl-logs/real2/, real3/) and blind (fixtures/nccl-logs/holdout/ .. holdout4/) sets
of real NCCL output: each README's table and the folder's files agree, every row is well formed, no thread is used twice
across the corpus, and the scoring script's verdicts mean what its docstring says.
Nothing here runs `nccl-log` on the blind set: it is scored once, by tests/nccl/score_corpus.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from score_corpus import NOT_FOUND, Expected, expected, judge, readme_rows

from topodoctor.nccl.explanations import EXPLANATIONS

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs"
SETS = ("real2", "real3", "holdout", "holdout2", "holdout3", "holdout4")


def _sources(folder: str) -> set[str]:
    return {row["source"] for row in readme_rows(LOGS / folder).values()}


@pytest.mark.parametrize("folder", SETS)
def test_the_table_and_the_files_agree(folder: str) -> None:
    rows = readme_rows(LOGS / folder)
    files = {p.name for p in (LOGS / folder).iterdir() if p.suffix == ".log"}
    assert files == set(rows)
    for name, row in rows.items():
        assert row["source"].startswith("https://github.com/"), name
        assert row["settled"] in ("thread", "log", "no"), name
        exp = expected(row)
        if exp.code is None:
            assert row["expected"] == "none, exit 0", name
        elif exp.code == "new":
            assert exp.severity == "error" and row["expected"].startswith("new error ("), name
        else:
            assert exp.code in EXPLANATIONS and EXPLANATIONS[exp.code].severity == exp.severity, name
        if row["settled"] == "no":  # a thread that settles nothing may only expect cause not found
            assert exp.code in NOT_FOUND, name
        if exp.exit_code == 1:
            assert row["names"], name


def test_the_blind_set_is_a_third_under_neutral_names() -> None:
    blind = readme_rows(LOGS / "holdout")
    dev = readme_rows(LOGS / "real2")
    assert all(re.fullmatch(r"f-\d{3}\.log", name) for name in blind)
    assert len(blind) >= 15 and len(blind) * 3 >= len(blind) + len(dev)
    kinds = {("healthy" if expected(r).code is None else r["settled"]) for r in blind.values()}
    assert {"healthy", "no", "thread", "log"} <= kinds  # drawn across kinds, not one class


def test_the_second_blind_set_is_neutral_and_drawn_across_kinds() -> None:
    blind = readme_rows(LOGS / "holdout2")
    assert all(re.fullmatch(r"h-\d{3}\.log", name) for name in blind) and len(blind) >= 15
    kinds = {("healthy" if expected(r).code is None else r["settled"]) for r in blind.values()}
    assert {"healthy", "no", "thread", "log"} <= kinds


def test_the_third_blind_set_is_neutral_and_drawn_across_kinds() -> None:
    blind = readme_rows(LOGS / "holdout3")
    assert all(re.fullmatch(r"h3-\d{3}\.log", name) for name in blind) and len(blind) >= 6
    kinds = {("healthy" if expected(r).code is None else r["settled"]) for r in blind.values()}
    assert {"healthy", "no", "thread", "log"} <= kinds


def test_the_fourth_blind_set_is_neutral_and_drawn_across_kinds() -> None:
    blind = readme_rows(LOGS / "holdout4")
    assert all(re.fullmatch(r"h4-\d{3}\.log", name) for name in blind) and len(blind) >= 8
    kinds = {("healthy" if expected(r).code is None else r["settled"]) for r in blind.values()}
    assert {"healthy", "no", "thread", "log"} <= kinds


def test_no_thread_is_used_twice() -> None:
    seen = [_sources(folder) for folder in ("real", *SETS)]
    for i, a in enumerate(seen):
        for b in seen[i + 1 :]:
            assert not a & b
    counted = [row["source"] for folder in SETS for row in readme_rows(LOGS / folder).values()]
    assert len(counted) == len(set(counted))


def _finding(code: str, severity: str = "error", fix: str = "", message: str = "") -> dict[str, object]:
    return {"code": code, "severity": severity, "fix": fix, "message": message}


def _ranking(code: str, *listed: str) -> dict[str, object]:
    """A finding that ranks candidates, as `nccl-log -f json` writes one."""
    evidence = {"cause": {"what": "", "confidence": "candidates"}, "candidates": list(listed)}
    return {**_finding(code, fix="; ".join(listed)), "evidence": evidence}


def test_a_ranked_answer_is_judged_by_its_first_candidate() -> None:
    settled = Expected("TD064", "error", 1, "NCCL_IB_GID_INDEX", "thread")
    gid_first = _ranking("TD064", "set NCCL_IB_GID_INDEX to the RoCE v2 GID", "NCCL_CROSS_NIC=0")
    assert judge(settled, 1, [gid_first]) == "named-right"
    rail_first = _ranking("TD064", "NCCL_CROSS_NIC=0", "set NCCL_IB_GID_INDEX to the RoCE v2 GID")
    assert judge(settled, 1, [rail_first]) == "cause-not-found"  # honest, but the settled cause is not first
    assert judge(settled, 1, [_ranking("TD064", "NCCL_CROSS_NIC=0", "a link down")]) == "confidently-wrong"
    assert judge(settled, 1, [_ranking("TD045", "set NCCL_IB_GID_INDEX", "a link down")]) == "cause-not-found"
    open_thread = Expected("TD052", "error", 1, "NCCL_DEBUG", "no")  # a ranked answer does not claim a cause
    assert judge(open_thread, 1, [rail_first]) == "cause-not-found-correct"


def test_verdicts() -> None:
    settled = Expected("TD053", "error", 1, "Fabric Manager", "thread")
    assert judge(settled, 1, [_finding("TD053", fix="restart the fabric manager")]) == "named-right"
    assert judge(settled, 1, [_finding("TD053", fix="reboot")]) == "confidently-wrong"
    assert judge(settled, 1, [_finding("TD055", fix="Fabric Manager")]) == "confidently-wrong"
    assert judge(settled, 1, [_finding("TD052")]) == "cause-not-found"
    assert judge(settled, 0, [_finding("TD051", "info")]) == "missed"
    new = Expected("new", "error", 1, "2.26", "thread")
    assert judge(new, 1, [_finding("TD057", message="a known bug of 2.25.1, fixed in 2.26.2")]) == "named-right"
    open_thread = Expected("TD052", "error", 1, "NCCL_DEBUG", "no")
    assert judge(open_thread, 1, [_finding("TD049")]) == "cause-not-found-correct"
    assert judge(open_thread, 1, [_finding("TD045")]) == "confidently-wrong"
    assert judge(open_thread, 0, []) == "missed"
    healthy = Expected(None, None, 0, "", "log")
    assert judge(healthy, 0, [_finding("TD051", "info")]) == "named-right"
    assert judge(healthy, 1, [_finding("TD043")]) == "missed"


def test_expected_cells() -> None:
    assert expected({"expected": "TD081 warning, exit 0", "names": "NCCL_IB_HCA"}).exit_code == 0
    assert expected({"expected": "none, exit 0"}).code is None
    assert expected({"expected": "new error (a class in words)"}) == Expected("new", "error", 1, "", "")
