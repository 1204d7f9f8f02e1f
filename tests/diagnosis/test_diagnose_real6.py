"""The sixth development set (fixtures/diagnose/real6/, its README) and the sixth blind set's cases of the same
classes (fixtures/diagnose/holdout6/: g-02, g-11, g-14, development since it was scored): a release's
regression matched by the symptom the evidence shows (TD037), NVLinks absent against an NVSwitch model
(TD031), NVLS figures compared across node counts (TD991) and NICs behind one PCI link in NCCL's topology
(TD993). Every case holds its verdict by the scorer's own rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests_support_evidence import assert_holds, case_findings, cases_of, evidence_of, one_finding

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "fixtures" / "diagnose" / "real6"
BLIND = ROOT / "fixtures" / "diagnose" / "holdout6"
CASES = cases_of(SET)
BLIND_CASES = cases_of(BLIND)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_holds_its_verdict(name: str) -> None:
    assert_holds(CASES[name], SET / name)


@pytest.mark.parametrize("name", ["g-02", "g-11", "g-14"])
def test_the_blind_sets_cases_of_these_classes_hold(name: str) -> None:
    assert_holds(BLIND_CASES[name], BLIND / name)


def test_nvlstree_named_in_a_sentence_is_the_regressions_symptom() -> None:
    """nccl#1112: "a significant performance reduction when using NVLSTree algorithm ... 8 AWS P5 nodes", no
    version shown: the 64 KiB chunks of 2.19.3 are the likely cause (no release has dropped them: transport/
    nvls.cc at 2.30.7 keeps the default), at warning, with the workaround and the version asked for."""
    f = one_finding(SET / "nvlstree-p5-chunk", "TD037")
    assert f.severity == "warning"
    assert "2.19.3" in f.message and "64 KiB" in f.message and "no release has dropped it" in f.message
    assert "NCCL_ALGO=^NVLSTree" in f.fix and "NCCL_NVLSTREE_MAX_CHUNKSIZE" in f.fix
    assert "NCCL_DEBUG=VERSION" in f.fix  # the version is not shown: asked for


def test_nccl_tests_units_line_without_its_hash_is_read_past() -> None:
    """pytorch#117748: the table's "(B) (elements) (us)" line lost its "#" in markdown; the row under it is read."""
    ev = evidence_of(BLIND / "g-02" / "evidence-1.txt")
    rows = [r for run in ev.collectives for r in run.rows]
    assert [r.size_bytes for r in rows] == [4294967296]
    assert rows[0].out_of_place is not None and rows[0].out_of_place.busbw_gbps == 104.20


def test_a_vm_whose_topo_shows_no_nvlink_where_the_reporter_expects_it() -> None:
    """azhpc-images#443: "the 2 GPU were not using NVLink but communicating via PCIe" beside topo -m's SYS: the
    NVLinks absent (TD031 at warning), with what to post; the tool's SYS and the sentence both quoted."""
    f = one_finding(SET / "azure-h100-nvlink-absent", "TD031")
    assert f.severity == "warning" and "shows none between them (SYS)" in f.message
    assert "nvidia-smi nvlink -s" in f.fix and "fabric" in f.fix
    assert len(f.evidence["lines"]) == 2  # type: ignore[arg-type]


def test_an_nvswitch_board_at_nv12_everywhere_is_not_nvlinks_absent() -> None:
    """nccl#1505: DGX A100's topo -m, NV12 between every pair: what an A100 SXM has, no TD031."""
    assert not any(f.code == "TD031" for f in case_findings(SET / "dgx-a100-topology"))


def test_nvls_across_node_counts_asks_for_the_ring_run() -> None:
    """nccl#1031: NVLS at 310 GB/s on 2 servers, 180 on 4: NCCL's model itself gives NVLSTree on two nodes twice the
    inter-node bandwidth (tuning.cc), so the drop is no fault by itself: cannot tell, the ring run asked for."""
    f = one_finding(BLIND / "g-11", "TD991")
    assert f.cause is None and "310 GB/s on 2 nodes, 180 GB/s on 4 nodes" in f.message
    assert "NCCL_ALGO=RING" in f.message and "NCCL_DEBUG=INFO" in f.message


def test_the_nics_named_with_fewer_used_are_the_topologys_first() -> None:
    """nccl#439: "The mlx5_0/mlx5_1 pair only used 1 HDR HCA": NCCL's topology putting the NICs behind one PCI
    link first (TD993 at warning, from the words), NCCL_TOPO_FILE the fix, the dump and the GRAPH log asked for."""
    f = one_finding(BLIND / "g-14", "TD993")
    assert f.severity == "warning" and "used 1 of the NICs mlx5_0/mlx5_1" in f.message
    assert "NCCL_TOPO_FILE" in f.fix and "NCCL_TOPO_DUMP_FILE" in str(f.evidence["post"])
