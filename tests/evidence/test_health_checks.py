"""Health-check tools' lines quoting a measured copy against their threshold (Azure NHC)."""

from __future__ import annotations

from evidence_support import ROOT, kinds, read

from topodoctor.evidence.inputs import read_input

CASE = ROOT / "fixtures/diagnose/real/normal-h100pcie-12-links"


def test_nhc_p2p_failures_are_nvbandwidth_cells() -> None:
    """Azure/azurehpc-health-checks#162 (fixtures/diagnose/real/normal-h100pcie-12-links): the P2P test of
    an H100 PCIe pair at 256.63 GB/s both ways under a 335 threshold; "GPU a to GPU b" is column a, row b
    of nvbandwidth's device_to_device_memcpy_read_ce (customTests/azure_gpu_bandwidth.nhc)."""
    got = read(CASE / "evidence-1.txt")
    assert kinds(got) == ["health-check"]
    (m,) = got.parts[0].copies
    assert (m.tool, m.testcase, m.rows, m.columns) == (
        "nvbandwidth",
        "device_to_device_memcpy_read_ce",
        ("0", "1"),
        ("0", "1"),
    )
    assert m.values == ((None, 256.63), (256.63, None))


def test_nhc_host_copies_among_other_check_lines() -> None:
    """The H2D form (one GPU, no peer) among NHC's other lines; a line cut before its figure is not read."""
    text = (
        "Running health checks\n"
        "ERROR:  nhc:  Health check failed:  check_gpu_bw: H2D test on GPU 3 failed. Bandwidth 20.1 is less than 24.\n"
        "dbg: H2D_GPU_4: 25.3 GB/s\n"
        "ERROR:  nhc:  Health check failed:  check_gpu_bw: H2D test on GPU 5 failed. Bandw\n"
    )
    got = read_input("nhc.log", text)
    (m,) = got.parts[0].copies
    assert (m.testcase, m.rows, m.columns, m.values) == ("host_to_device_memcpy_ce", ("host",), ("3",), ((20.1,),))
