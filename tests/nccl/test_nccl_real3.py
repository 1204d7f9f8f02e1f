"""The third development set (fixtures/nccl-logs/real3/, its README): every log read alone and judged by the
scorer's own rules holds its verdict: the stray connection and the old remote allocator's warning stay quiet
with their reading, every thread that settles nothing is answered cause not found or with ranked candidates,
none is missed and none confidently wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from score_corpus import expected, judge, readme_rows

from topodoctor.model.findings import finding_json
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

SET = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "real3"
ROWS = readme_rows(SET)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_log_holds_its_verdict(name: str) -> None:
    findings = explain([parse_file(name, (SET / name).read_text(errors="replace"))])
    rc = 1 if any(f.severity in ("error", "critical") for f in findings) else 0
    verdict = judge(expected(ROWS[name]), rc, [finding_json(f) for f in findings])
    assert verdict in ("named-right", "cause-not-found-correct"), (name, verdict)


def test_the_stray_connection_is_told_by_its_bytes() -> None:
    name = "nccl-1808-wrong-magic-http-client.log"
    (f,) = explain([parse_file(name, (SET / name).read_text())])
    assert f.code == "TD051" and "'GET /met'" in f.fix
