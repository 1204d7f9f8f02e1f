"""The twelfth blind set (fixtures/diagnose/holdout12), scored once and now a development set: a bus bandwidth
that dips at some sizes and recovers (TD996), a multi-node run not taken for a node's missing NVLinks, AMD's GPUs
not judged against NVIDIA's models."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judge, judged_with

from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.findings import Finding

SET = FIXTURES / "diagnose" / "holdout12"


def _case(name: str, *replace: tuple[str, str]) -> list[Finding]:
    return judged_with(SET / name, *replace)


def _serious(found: list[Finding]) -> list[str]:
    return [f.code for f in found if f.severity in ("warning", "error")]


def test_a_busbw_dip_that_recovers_asks_for_ncclS_tuning() -> None:
    found = _case("d12-03")  # two p4d: 32.6 GB/s at 32 MiB, 19.1 at 64 MiB, 42.6 at 256 MiB
    dip = [f for f in found if f.code == "TD996"]
    assert len(dip) == 1 and dip[0].severity == "warning" and "TUNING" in dip[0].message
    assert _serious(found) == ["TD996"]  # no NVLinks-absent guess for a run across two instances


def test_amd_gpus_are_not_judged_against_nvidia_models() -> None:
    found = _case("d12-02")  # 8 x MI100 in xGMI hives, rocm_bandwidth_test
    assert not _serious(found) and any("AMD" in f.message for f in found)


def test_a_measured_table_that_climbs_has_no_dip() -> None:
    real = (FIXTURES / "nccl-tests" / "h200-x2" / "all_reduce.txt").read_text()  # two H200s, a real run
    assert "TD996" not in [f.code for f in judge(join([read_input("all_reduce.txt", real)]))]
