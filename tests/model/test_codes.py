"""The one table of codes (topodoctor/model/codes.py): every code the package can raise is in it,
each origin's codes are there as the origin declares them, and `topodoctor rules` lists them all."""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT

from topodoctor.cli.commands import main
from topodoctor.fleet.codes import CODES as HISTORY
from topodoctor.model import codes
from topodoctor.nccl.explain import EXPLANATIONS
from topodoctor.nccl.explanation import explained
from topodoctor.report.rule_docs import explain_markdown, rules_markdown
from topodoctor.rules.registry import REGISTRY

_LITERAL = re.compile(r"[\"'](TD\d{3})[\"']")


def _written_codes() -> dict[str, str]:
    """Every code written as a string in the package's source, with the first file that writes it."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "topodoctor").rglob("*.py")):
        for code in _LITERAL.findall(path.read_text()):
            found.setdefault(code, str(path.relative_to(ROOT)))
    return found


def test_every_code_the_package_writes_is_in_the_table() -> None:
    written = _written_codes()
    assert len(written) > 150
    missing = {c: where for c, where in written.items() if c != "TD000" and c not in codes.TABLE}
    assert not missing, f"codes written in the package but in no origin's table: {missing}"


def test_each_origin_is_in_the_table_as_it_declares_its_codes() -> None:
    by = {origin: {c.code for c in group} for origin, group in codes.by_origin()}
    assert by["rule"] == set(REGISTRY)
    assert by["nccl-log"] == set(EXPLANATIONS)
    assert by["fleet-history"] == set(HISTORY)
    assert {c: codes.TABLE[c].name for c in EXPLANATIONS} == {c: e.name for c, e in EXPLANATIONS.items()}
    assert codes.TABLE["TD953"].also == frozenset({"warning"})


def test_a_class_declared_the_way_nccl_log_declares_them_is_listed_and_explained() -> None:
    try:
        explained("TD969", "staged-for-a-test", "warning", "A class staged for a test", "Do nothing.")
        assert codes.lookup("nccl-log-staged-for-a-test") == codes.TABLE["TD969"]
        assert codes.TABLE["TD969"].origin == "nccl-log"
    finally:
        codes.unregister("TD969")


@pytest.mark.parametrize(
    ("code", "name", "said"),
    [("TD101", "another-name", "TD101 registered twice (rule nvlink-down and nccl-log another-name)"),
     ("TD969", "nvlink-down", "name 'nvlink-down' registered twice"),
     ("TD0", "short", "not TD + 3 digits")],
)  # fmt: skip
def test_a_code_or_name_another_origin_holds_is_refused(code: str, name: str, said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)):
        codes.register(codes.Code(code, "nccl-log", name, "error", "A staged entry"))
    assert codes.TABLE["TD101"].origin == "rule" and "TD969" not in codes.TABLE


def test_rules_lists_every_code_grouped_by_origin(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    text = capsys.readouterr().out
    listed = re.findall(r"^(TD\d{3}) ", text, re.M)
    own = sorted(c for c, e in codes.TABLE.items() if e.origin == "diagnose")
    assert own == ["TD980", "TD981"]
    assert listed == sorted(REGISTRY) + sorted(EXPLANATIONS) + sorted(HISTORY) + own
    assert (
        text.index("what an NCCL log says")
        < text.index("TD040")
        < text.index("a fleet's history")
        < text.index("TD950")
    )
    assert main(["rules", "-f", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["code"] for r in rows] == listed and {r["origin"] for r in rows} == set(codes.ORIGINS)
    assert next(r for r in rows if r["code"] == "TD950")["family"] == "fleet-history"


def test_explain_and_the_page_show_every_code() -> None:
    page = rules_markdown()
    for code, entry in codes.TABLE.items():
        assert f"### {code} {entry.name}\n" in page, code
        assert entry.title.rstrip(".") in explain_markdown(code).replace("\n", " "), code
