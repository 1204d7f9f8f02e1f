"""A release's regression matched by version and symptom (TD037), NVLinks absent against the model (TD031) and NICs
behind one PCI link (TD993), on NCCL's own lines (topo.cc's printed tree, NCCL's banner) and the reporter's words."""

from __future__ import annotations

from pathlib import Path

from tests_support_evidence import judge

from topodoctor.diagnosis.perf_regressions import REGRESSIONS
from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import Finding


def _ev(*texts: str) -> Evidence:
    return join([read_input(f"input{k}.txt", t) for k, t in enumerate(texts)])


def _codes(ev: Evidence, code: str) -> list[Finding]:
    return [f for f in judge(ev) if f.code == code]


# topo.cc ncclTopoPrintRec's tree (2.21's ids), as NCCL logs it with NCCL_DEBUG_SUBSYS=GRAPH: a GPU under switch
# 41000 and two HDR NICs under the link to 52000 below it, the layout NVIDIA/nccl#439's maintainer described
SHARED = """node1:2001:2050 [0] NCCL INFO === System : maxBw 24.0 totalBw 240.0 ===
node1:2001:2050 [0] NCCL INFO CPU/0-0 (1/2/0)
node1:2001:2050 [0] NCCL INFO + PCI[24.0] - PCI/0-41000 (15b3101b)
node1:2001:2050 [0] NCCL INFO               + PCI[24.0] - GPU/0-4b000 (0)
node1:2001:2050 [0] NCCL INFO               + PCI[24.0] - PCI/0-52000 (15b3101b)
node1:2001:2050 [0] NCCL INFO                             + PCI[24.0] - NIC/0-53000
node1:2001:2050 [0] NCCL INFO                                           + NET[25.0] - NET/0-0 (0/0/1/25.000000)
node1:2001:2050 [0] NCCL INFO                             + PCI[24.0] - NIC/0-54000
node1:2001:2050 [0] NCCL INFO                                           + NET[25.0] - NET/1-0 (0/0/1/25.000000)
node1:2001:2050 [0] NCCL INFO ==========================================
"""
# NVIDIA/nccl#601's log (2.x, two 10 GbE ports of one NIC behind a 3.0 GB/s link): the ports' 2.5 GB/s fit the link
ETHERNET = """gpu23:1513:1528 [2] NCCL INFO === System : maxWidth 1.2 ===
gpu23:1513:1528 [2] NCCL INFO CPU/0 (1/1/1)
gpu23:1513:1528 [2] NCCL INFO + PCI[12.0] - GPU/2000 (0)
gpu23:1513:1528 [2] NCCL INFO + PCI[12.0] - GPU/3000 (1)
gpu23:1513:1528 [2] NCCL INFO + SYS[6.0] - CPU/1
gpu23:1513:1528 [2] NCCL INFO + PCI[3.0] - NIC/1000
gpu23:1513:1528 [2] NCCL INFO              + NET[1.2] - NET/0 (0/0/1.250000)
gpu23:1513:1528 [2] NCCL INFO              + NET[1.2] - NET/1 (1/0/1.250000)
gpu23:1513:1528 [2] NCCL INFO CPU/1 (1/1/1)
"""


def test_two_nics_behind_one_link_no_gpu_under_it_is_td993() -> None:
    f = _codes(_ev(SHARED), "TD993")
    assert len(f) == 1 and f[0].severity == "warning"
    assert "PCI/0-52000, 24 GB/s" in f[0].message and "50 GB/s" in f[0].message
    assert "NCCL_TOPO_FILE" in f[0].fix and "dual-port" in f[0].fix


def test_ports_whose_total_fits_their_link_are_not() -> None:
    assert not _codes(_ev(ETHERNET), "TD993")


def test_a_dgx_a100_dump_gives_each_nic_its_own_link() -> None:
    """NVIDIA/nccl#1505's NCCL_TOPO_DUMP_FILE of a DGX A100: mlx5_0 under its own Gen4 x16 link (24 GB/s as NCCL
    rates it), no other net beside it: no TD993."""
    p = Path(__file__).resolve().parents[2] / "fixtures" / "evidence" / "nccl-topo-dump-dgx-a100-cut.xml"
    ev = _ev(p.read_text())
    assert [(n.name, n.pci_busid, n.pci_link_gbps) for n in ev.nics] == [("mlx5_0", "0000:0c:00.0", 24.0)]
    assert not _codes(ev, "TD993")


def test_a_gpu_under_the_same_link_keeps_its_traffic_below_it() -> None:
    """A switch uplink with a GPU beside the NICs below it: GPUDirect traffic stays under the switch."""
    moved = SHARED.replace("               + PCI[24.0] - GPU/0-4b000 (0)\n", "").replace(
        "NIC/0-54000\n", "NIC/0-54000\nnode1:2001:2050 [0] NCCL INFO                             + PCI[24.0] - "
        "GPU/0-5b000 (0)\n")  # fmt: skip
    assert not _codes(_ev(moved), "TD993")


def test_a_version_in_the_range_names_the_regression_with_its_fix() -> None:
    """NCCL_CROSS_NIC=1 on 2.24.3: 2.26.2's notes name the regression (alternating rings): fixed in 2.26.2."""
    launch = "mpirun -np 16 -H a:8,b:8 -x NCCL_CROSS_NIC=1 ./all_reduce_perf -b 8 -e 8G -f 2 -g 1\nNCCL 2.24.3\n"
    f = _codes(_ev(launch), "TD037")
    assert f and "a known performance regression of NCCL 2.24.3" in f[0].message
    assert "fixed in 2.26.2: upgrade NCCL" in f[0].message and "Upgrade NCCL to 2.26.2" in f[0].fix


def test_a_version_outside_the_range_rules_it_out() -> None:
    launch = "mpirun -np 16 -H a:8,b:8 -x NCCL_CROSS_NIC=1 ./all_reduce_perf -b 8 -e 8G -f 2 -g 1\nNCCL 2.26.2\n"
    assert not [f for f in _codes(_ev(launch), "TD037") if "CROSS_NIC" in f.message]


def test_a_fixed_regression_is_not_named_without_the_version() -> None:
    """NVLS on one node named, no version: 2.18.5 fixed its NVLS search, so no release in use is likely to have it."""
    assert not _codes(_ev("We enabled NVLS on 8 x H100 SXM on one node and the all_reduce looks slow."), "TD037")


def test_every_regression_has_a_source_and_a_range() -> None:
    for r in REGRESSIONS:
        assert r.first <= r.last and r.source and r.where and r.what
        assert not r.fixed or tuple(int(x) for x in r.fixed.split(".")) > r.last


def test_the_reporters_phb_rather_than_nvlink_on_an_sxm_model() -> None:
    """stanford_alpaca#32's own finding in words: "It was using PCIe cpu (PHB) rather than NVLINK" on 4 x
    A100-SXM4-80GB: NVLinks absent against the model, at warning, from the reporter's words."""
    ev = _ev("I am running the script on 4xA100-SXM4-80GB and it is much slower than expected.\n"
             "It was using PCIe cpu (PHB) rather than NVLINK.\n")  # fmt: skip
    f = _codes(ev, "TD031")
    assert len(f) == 1 and f[0].severity == "warning" and "PHB rather than NVLink" in f[0].message
    assert "nvidia-smi topo -m" in f[0].fix
