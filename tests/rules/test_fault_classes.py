"""Each fault class on its own scenario derived from a real recording (fixtures/derive.py):
the finding names the GPU, link or bus function at fault, and nothing else."""

from __future__ import annotations

import pytest
from conftest import scenario_path

from topodoctor.model.snapshot import RetiredPages
from topodoctor.probe.sources import probe_host
from topodoctor.rules import Context, Environment, evaluate

QUIET = Environment({}, {}, {}, (), None)


def _subjects(name: str, code: str) -> list[str]:
    snap = probe_host(str(scenario_path(name))).snapshot
    return sorted(f.subject for f in evaluate(Context(snap, QUIET)) if f.code == code)


@pytest.mark.parametrize(
    ("scenario", "code", "subjects"),
    [
        ("x2-nvlink-down", "TD101", ["GPU1/nvlink5"]),  # 2 GPUs: no majority of peers to lean on
        ("x2-nvlinks-all-down", "TD101", ["GPU0", "GPU1"]),
        ("x4-nvlink-down", "TD101", ["GPU1/nvlink5"]),
        ("x4-same-link-down", "TD101", ["GPU1/nvlink7", "GPU2/nvlink7"]),
        ("x4-two-gpus-links-down", "TD101", ["GPU2", "GPU3"]),
        ("x4-pcie-fallback", "TD101", ["GPU3"]),
        ("x4-fabric-not-started", "TD501", ["GPU0", "GPU1", "GPU2", "GPU3"]),
        ("x4-fabric-in-progress", "TD501", ["GPU0", "GPU1", "GPU2", "GPU3"]),
        ("x4-gpu-lost", "TD507", ["GPU3"]),
        ("x4-gpu-lost-in-pairs", "TD507", ["GPU3"]),  # not GPU0, the other GPU of the pair call
        ("x4-gpu-not-counted", "TD508", ["pci:00000000:00:09.0"]),
        ("x4-retired-pages", "TD509", ["GPU2"]),
        ("x4-retired-pages", "TD510", ["GPU1"]),
        ("x4-nvlink-errors", "TD104", ["GPU0/nvlink3"]),
        ("x4-nvlink-errors", "TD105", ["GPU0/nvlink4"]),
        ("x4-pcie-downtrained", "TD205", ["GPU1"]),
        ("x4-pcie-downtrained", "TD206", ["GPU3"]),
        ("pcie-2socket", "TD202", ["host"]),  # one finding for the layout, not one per pair
        ("pcie-2socket", "TD301", ["host", "host"]),  # one per NVML reason: chipset, IOH topology
        ("x4-p2p-disabled", "TD305", ["host"]),
    ],
)
def test_fault_is_blamed_on_its_subject(scenario: str, code: str, subjects: list[str]) -> None:
    assert _subjects(scenario, code) == subjects


def test_lost_in_pairs_keeps_the_other_gpus() -> None:
    snap = probe_host(str(scenario_path("x4-gpu-lost-in-pairs"))).snapshot
    assert [g.index for g in snap.gpus if g.lost is not None] == [3]
    assert snap.gpus[3].lost is not None and snap.gpus[3].lost.call == "nvmlDeviceGetPciInfo"


def test_retired_pages_are_read_where_supported() -> None:
    snap = probe_host(str(scenario_path("x4-retired-pages"))).snapshot
    assert snap.gpus[1].retired_pages == RetiredPages(40, 24, False)
    assert snap.gpus[2].retired_pages == RetiredPages(2, 1, True)
    assert not isinstance(snap.gpus[0].retired_pages, RetiredPages)  # Hopper: NOT_SUPPORTED


def test_sys_pairs_are_one_finding_with_the_pairs_in_evidence() -> None:
    snap = probe_host(str(scenario_path("pcie-2socket"))).snapshot
    (f,) = [f for f in evaluate(Context(snap, QUIET)) if f.code == "TD202"]
    assert len(f.evidence["pairs"]) == 12  # 6 GPUs on socket 0 x 2 on socket 1
    assert (
        f.message.startswith("12 GPU pairs connect only across the CPU sockets (SYS), e.g. GPU0-GPU6")
        and "GPU0-GPU6" in f.evidence["pairs"]
    )
