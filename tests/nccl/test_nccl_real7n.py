"""The seventh development set's network side (fixtures/nccl-logs/real7/, its README): a socket connect to an
address the nodes do not route (loopback, link-local 169.254 / fe80::) ranks NCCL_SOCKET_IFNAME first among
its candidates, and torch's c10d store whose bind found its port taken is read in each wording torch printed.
Every log holds its verdict by the scorer's own rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from score_corpus import findings_of, readme_rows, verdict_of

SET = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "real7"
ROWS = readme_rows(SET)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_log_holds_its_verdict(name: str) -> None:
    verdict = verdict_of(SET, ROWS[name], name)
    assert verdict in ("named-right", "cause-not-found-correct"), (name, verdict)


@pytest.mark.parametrize("name", ["r7n-001.log", "r7n-004.log", "r7n-005.log"])
def test_a_connect_to_an_unrouted_address_puts_the_interface_first(name: str) -> None:
    (f,) = findings_of(SET, name)
    assert f.code == "TD072" and f.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]
    first, *rest = f.evidence["candidates"]  # type: ignore[misc]
    assert "NCCL_SOCKET_IFNAME" in first and any("not listening" in c for c in rest)


def test_torchs_bare_runtime_error_under_the_store_is_the_port_in_use() -> None:
    (f,) = findings_of(SET, "r7n-002.log")
    assert f.code == "TD091" and f.severity == "error" and "MASTER_PORT" in f.fix
