"""The one output asked for first when the evidence leaves causes open: the one that tells the two likeliest
apart (diagnosis/evidence_decide.py, from what each output shows), on real pastes (their threads in
fixtures/diagnose/*/README.md and fixtures/evidence/README.md)."""

from __future__ import annotations

from pathlib import Path

from tests_support_evidence import judge

from topodoctor.diagnosis.evidence_decide import (
    ACS_IOMMU,
    DECIDES,
    GDR,
    IBSTAT,
    LSPCI,
    NCCL_LOG,
    NCCL_TESTS,
    PATH,
    PCIE_DOWN,
    PORTS,
    SOCKETS,
    TOPO,
    first_ask,
)
from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.evidence import Evidence

ROOT = Path(__file__).resolve().parents[2]


def _read(*paths: str) -> Evidence:
    return join([read_input(p, (ROOT / p).read_text()) for p in paths])


def test_the_table_pairs_causes_one_output_shows_both_of() -> None:
    """NCCL's INFO log shows the network taken and GPUDirect RDMA; lspci -vvv both ACSCtl and LnkSta; no
    one output shows both the GPUs' path and a port's rate, so that pair has no entry."""
    assert DECIDES[frozenset((SOCKETS, GDR))] == NCCL_LOG
    assert DECIDES[frozenset((ACS_IOMMU, PCIE_DOWN))] == LSPCI
    assert frozenset((PATH, PORTS)) not in DECIDES
    assert first_ask([PATH, PORTS]) == TOPO  # none decides both: what shows the likeliest
    assert first_ask([PORTS]) == IBSTAT and first_ask([]) is None


def test_a_launch_naming_one_nic_asks_first_for_nccls_log_and_names_the_nic() -> None:
    """mpirun over two hosts with NCCL_IB_HCA=mlx5_0 and nothing else (fixtures/diagnose/holdout2/c-06): the
    log tells sockets from GPUDirect RDMA, the two likeliest; the one NIC named is a candidate."""
    (f,) = [x for x in judge(_read("fixtures/diagnose/holdout2/c-06/evidence-1.txt")) if x.code == "TD022"]
    assert f.evidence["post"][0] == NCCL_LOG
    assert f"First post {NCCL_LOG}" in f.message
    assert "one NIC used of several (NCCL_IB_HCA=mlx5_0)" in f.message


def test_a_topology_alone_asks_first_for_the_figure() -> None:
    """`nvidia-smi topo -m` of an H100 host with NICs and nothing measured: the first thing to post is
    nccl-tests' output, since nothing says anything is slow."""
    (f,) = [x for x in judge(_read("fixtures/evidence/topo-h100-nv6-nics.txt")) if x.code == "TD022"]
    assert (f.severity, f.subject) == ("info", "figures")
    assert f.evidence["post"][0] == NCCL_TESTS
