"""The expectation a user's evidence is held against: the GPU model table, the busbw model fed a Layout
(the same prediction `collectives --predict` makes from a probed host), copies' nominal rates, and the
adapter that gives TD003 its facts from topodoctor's own run."""

from __future__ import annotations

import pytest
from evidence_cases import evidence, topo

from topodoctor.diagnosis.evidence_expect import copy_nominal
from topodoctor.diagnosis.evidence_facts import facts_of
from topodoctor.diagnosis.fallback import NVLINK_ONLY, P2P_BY_DEFAULT, facts_of_run, fallbacks
from topodoctor.diagnosis.perf_regressions import regressions_of, version_of
from topodoctor.model.collectives import Connection, NcclAccount
from topodoctor.probe.sources import probe_host
from topodoctor.topology.busbw import Layout, predict, predict_layout
from topodoctor.topology.gpu_models import MODELS, SOURCES, model_of


@pytest.mark.parametrize(
    ("printed", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),  # NVIDIA/nccl#1453's nccl-tests header
        ("NVIDIA H200", "H200 SXM"),  # the lent hosts' nvidia-smi
        ("NVIDIA H100 NVL", "H100 NVL"),  # NVIDIA/nccl#2441
        ("NVIDIA GH200 480GB", "GH200"),  # NVIDIA/nccl#1291
        ("A100-SXM4-40GB", "A100 SXM"),  # nccl-tests#128 (older nvidia-smi, no "NVIDIA ")
        ("NVIDIA A100 80GB PCIe", "A100 PCIe"),  # NVIDIA/nccl#841
        ("Tesla V100-PCIE-16GB", "V100 PCIe"),  # nccl-tests#82
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA RTX A6000", "RTX A6000"),
        ("NVIDIA A40", "A40"),  # NVIDIA/nccl#770
        ("NVIDIA L40S", "L40S"),
        ("Tesla T4", "T4"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA A800-SXM4-80GB", "A800 SXM"),  # the China-market A100: 8 NVLinks, not 12
        ("NVIDIA A800 80GB PCIe", "A800 PCIe"),
        ("NVIDIA H800", "H800 SXM"),  # the China-market H100: 8 NVLinks, not 18
        ("NVIDIA H800 PCIe", "H800 PCIe"),
    ],
)
def test_gpu_names_as_printed_find_their_model(printed: str, model: str) -> None:
    found = model_of(printed)
    assert found is not None and found.name == model


def test_a800_and_h800_carry_two_thirds_and_less_than_half_of_their_twins_nvlink() -> None:
    a800, a100 = model_of("NVIDIA A800-SXM4-80GB"), model_of("NVIDIA A100-SXM4-80GB")
    h800, h100 = model_of("NVIDIA H800"), model_of("NVIDIA H100 80GB HBM3")
    assert a800 and a100 and h800 and h100
    assert a800.nvlink_total_gbps and a100.nvlink_total_gbps and h800.nvlink_total_gbps and h100.nvlink_total_gbps
    assert a800.nvlink_total_gbps / a100.nvlink_total_gbps == pytest.approx(8 / 12)
    assert h800.nvlink_total_gbps / h100.nvlink_total_gbps == pytest.approx(8 / 18)
    assert (a800.fabric, h800.fabric, h800.nvls, a800.nvls) == ("nvswitch", "nvswitch", True, False)


def test_the_model_table_is_sourced_and_consistent() -> None:
    assert model_of("NVIDIA Quadro K2200") is None
    for m in MODELS:
        assert m.source in SOURCES
        assert (m.nvlink_gen is None) == (m.nvlink_links == 0) == (m.nvlink_gbps is None), m.name
        assert not m.nvls or m.fabric == "nvswitch", m.name
    h100 = model_of("NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.nvlink_total_gbps == pytest.approx(478.125)  # 18 x 26.5625, facts file
    assert {m.name: m.nvlink_links for m in MODELS if m.name in ("H100 NVL", "V100 SXM2", "A100 SXM")} == {
        "H100 NVL": 12,
        "V100 SXM2": 6,
        "A100 SXM": 12,
    }


def test_a_layout_predicts_what_the_probed_host_predicts() -> None:
    """The h200-x4 recording (4 x H200, 18 NVLinks each to NVSwitch) and the same node described as a user's
    topo -m shows it: one model, one figure for every op."""
    from_snapshot = {p.op: p.busbw_gbps for p in predict(probe_host("h200-x4").snapshot)}
    from_layout = {p.op: p.busbw_gbps for p in predict_layout(Layout(4, 18, True, "9.0"))}
    assert from_layout == from_snapshot
    assert from_layout["all_reduce"] == pytest.approx(345.6)


def test_a_pcie_layout_is_credited_as_nccl_rates_pcie() -> None:
    """Eight PCIe Gen4 GPUs: NCCL credits 24 GB/s (topo.cc: 16 lanes x 120 / 80), about the 28 GB/s
    all_reduce people see on such hosts."""
    preds = {p.op: p for p in predict_layout(Layout(8, 0, False, "8.6", 4, 16))}
    assert 23 < preds["all_reduce"].busbw_gbps < 24.5 and "PCIe Gen4 x16" in preds["all_reduce"].bottleneck.what


def test_copy_nominal_from_the_pair_and_the_model() -> None:
    cells = "      GPU0 GPU1 GPU2\nGPU0 X NV18 PHB\nGPU1 NV18 X PHB\nGPU2 PHB PHB X"
    from topodoctor.model.evidence import GpuSeen

    f = facts_of(evidence(topo(cells), GpuSeen(0, 0, name="NVIDIA H200")))
    nv = copy_nominal(f, 0, 1)
    pci = copy_nominal(f, 0, 2)
    assert nv is not None and nv[0] == pytest.approx(478.125)
    assert pci is not None and pci[0] == pytest.approx(63.0, abs=0.1) and "PCIe Gen5 x16" in pci[1]


def test_nccl_versions_and_the_regression_table() -> None:
    assert version_of("2.28.9+cuda13.0") == (2, 28, 9)
    assert version_of("nccl-headers=22809 nccl-library=23005") == (2, 30, 5)
    assert [r.source for r in regressions_of("2.16.2", "Ampere")] == ["https://github.com/NVIDIA/nccl/issues/770"]
    assert regressions_of("2.16.2", "Hopper") == [] and regressions_of("2.15.5", "Ampere") == []


def test_the_run_adapter_gives_td003_its_pairs() -> None:
    """topodoctor's own run as TD003 sees it: ranks 0 and 1 on GPUs 0 and 1 (NV18) via SHM; NVLink-only
    classes (TD003) and NCCL's default P2P classes (diagnose) agree on an NVLink pair, and a PHB pair is
    NCCL's default SHM, not a fallback."""
    from types import SimpleNamespace

    acc = NcclAccount("2.28.9", 2, 1, 2, 2, 0, None, None, (Connection(0, 1, "SHM", 2, "shm"),), (), (), {}, 2)
    res = SimpleNamespace(env={"NCCL_P2P_DISABLE": "1"}, nccl=acc, ranks=())
    f = facts_of_run(res, {0: 0, 1: 1}, {(0, 1): "NV18"})  # type: ignore[arg-type]
    (fb,) = fallbacks(f, NVLINK_ONLY)
    assert fb.gpus == (0, 1) and fb.by == {"SHM": 2} and fb.path == "NV18"
    assert fallbacks(f, P2P_BY_DEFAULT) == [fb]
    assert fallbacks(facts_of_run(res, {0: 0, 1: 1}, {(0, 1): "PHB"}), P2P_BY_DEFAULT) == []  # type: ignore[arg-type]


def test_nvbandwidth_bidirectional_read1_is_one_direction() -> None:
    """reference-outputs/h200-x4/nvb.txt: device_to_device_bidirectional_memcpy_read_ce prints Read1 and
    Read2 (389 GB/s each, one direction while the other runs) and Total (779): all three are healthy."""
    from evidence_cases import evidence, topo
    from tests_support_evidence import judge

    from topodoctor.model.evidence import CopyMatrix, GpuSeen

    cells = "      GPU0 GPU1\nGPU0 X NV18\nGPU1 NV18 X"
    case = "device_to_device_bidirectional_memcpy_read_ce"
    mats = tuple(
        CopyMatrix(
            0,
            "nvbandwidth",
            f"{case}_{part}",
            "bidirectional",
            None,
            "GB/s",
            ("0", "1"),
            ("0", "1"),
            ((None, v), (v, None)),
        )
        for part, v in (("read1", 389.41), ("read2", 389.41), ("total", 778.81))
    )
    found = judge(evidence(topo(cells), GpuSeen(0, 0, name="NVIDIA H200"), mats))
    assert {f.code for f in found} == {"TD021"} and len(found) == 3


def test_a_copy_under_any_x16_link_is_a_symptom_without_the_model() -> None:
    """No GPU names, no topo -m: a pair's copies at 3.6 GB/s are under what any GPU at full width gives
    (PCIe Gen3 x16, 15.8 GB/s one way), so the judgement asks for the PCIe link; 12 GB/s says nothing."""
    from evidence_cases import evidence, matrix
    from tests_support_evidence import judge

    slow = judge(
        evidence(matrix("D\\D 0 1\n0 580 3.6\n1 3.6 580", "unidirectional p2p=enabled", "unidirectional", True))
    )
    assert [(f.code, f.severity) for f in slow] == [("TD022", "warning")]
    assert "`nvidia-smi -q`" in slow[0].message and "NCCL_DEBUG" not in slow[0].message
    fine = judge(
        evidence(matrix("D\\D 0 1\n0 580 12.0\n1 12.0 580", "unidirectional p2p=enabled", "unidirectional", True))
    )
    assert fine == ()
