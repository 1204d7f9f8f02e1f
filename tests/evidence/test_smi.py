"""nvidia-smi's short outputs (-L, nvlink -s, nvlink -e, the plain table) and -q's sections."""

from __future__ import annotations

from evidence_support import EVIDENCE, only, read


def test_h200_x4_host_capture_holds_every_short_output() -> None:
    got = read(EVIDENCE / "h200-x4" / "host.txt")
    summary = got.parts[only(got, "smi-summary")]
    assert (summary.driver_version, summary.cuda_version) == ("580.159.04", "13.0")
    first = summary.gpus[0]
    assert (first.index, first.name, first.bus_id) == (0, "NVIDIA H200", "00000000:00:06.0")
    status = got.parts[only(got, "nvlink-status")]
    assert [(g.nvlinks_up, g.nvlinks_listed, g.nvlink_gbps) for g in status.gpus] == [(18, 18, 26.562)] * 4
    errors = got.parts[only(got, "nvlink-errors")]
    assert errors.gpus[0].nvlink_errors == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}


def test_inactive_links_are_listed_but_not_up() -> None:
    got = read(EVIDENCE / "nvlink-status-v100-inactive.txt")
    gpu = got.parts[0].gpus[0]
    assert (gpu.index, gpu.name, gpu.nvlinks_up, gpu.nvlinks_listed, gpu.nvlink_gbps) == (
        3, "Tesla V100-SXM2-32GB", 4, 6, 25.781,
    )  # fmt: skip


def test_gb200_listing_cut_after_two_links_of_the_second_gpu() -> None:
    got = read(EVIDENCE / "nvlink-status-gb200.txt")
    assert [(g.nvlinks_up, g.nvlink_gbps) for g in got.parts[0].gpus] == [(18, 53.125), (2, 53.125)]


def test_plain_table_pasted_without_its_banner() -> None:
    got = read(EVIDENCE / "smi-summary-a100-driver535-cut.txt")
    assert [g.bus_id for g in got.parts[0].gpus] == ["00000000:2A:00.0", "00000000:51:00.0", "00000000:57:00.0"]
    assert "below the banner" in got.pieces[0].cut


def test_gpu_list_of_eight() -> None:
    got = read(EVIDENCE / "h200-x8" / "host.txt")
    part = got.parts[only(got, "smi-list")]
    assert [g.index for g in part.gpus] == list(range(8))
    assert part.gpus[7].uuid == "GPU-00000000-0000-0000-0000-000000000012"
    assert part.gpus[0].nvlinks_up is None  # -L says nothing of the links: not shown, not zero


def test_query_sections_of_h200_x4() -> None:
    got = read(EVIDENCE / "h200-x4" / "smi_q.txt")
    part = got.parts[only(got, "smi-query")]
    assert (part.driver_version, part.cuda_version) == ("580.159.04", "13.0")
    assert len(part.gpus) == 4
    g = part.gpus[0]
    assert (g.name, g.bus_id, g.uuid) == ("NVIDIA H200", "00000000:00:06.0", "GPU-00000000-0000-0000-0000-000000000001")
    assert (g.pcie_gen, g.pcie_gen_max, g.pcie_width, g.pcie_width_max) == (5, 5, 16, 16)
    assert g.virtualization == "Pass-Through" and g.fabric_state == "Completed / Success"
    assert g.ecc_uncorrected == 0 and g.remapping_pending is False and g.remapping_failed is False
    assert g.clock_event_reasons == ()  # only Idle is active, and idle is not a slowdown


def test_old_drivers_throttle_reasons_and_a_downtrained_link() -> None:
    text = (
        "==============NVSMI LOG==============\n\nDriver Version                            : 470.82.01\n"
        "CUDA Version                              : 11.4\n\nAttached GPUs                             : 1\n"
        "GPU 00000000:3B:00.0\n    Product Name                          : Tesla V100-PCIE-32GB\n"
        "    PCI\n        GPU Link Info\n            PCIe Generation\n                Max                       : 3\n"
        "                Current                   : 1\n            Link Width\n"
        "                Max                       : 16x\n"
        "                Current                   : 8x\n    Clocks Throttle Reasons\n"
        "        Idle                              : Not Active\n        HW Slowdown                       : Active\n"
        "        SW Thermal Slowdown               : Not Active\n"
    )
    from topodoctor.evidence.inputs import read_input

    got = read_input("q", text)
    g = got.parts[0].gpus[0]
    assert (g.pcie_gen, g.pcie_gen_max, g.pcie_width, g.pcie_width_max) == (1, 3, 8, 16)
    assert g.clock_event_reasons == ("HW Slowdown",) and got.parts[0].driver_version == "470.82.01"


def test_an_older_drivers_query_of_one_gpu_cut_in_its_pci_section() -> None:
    got = read(EVIDENCE / "smi-query-v100-driver410-cut.txt")
    g = got.parts[only(got, "smi-query")].gpus[0]
    assert (g.name, g.bus_id, g.virtualization) == ("Tesla V100-SXM2-16GB", "00000000:8A:00.0", "None")
    assert g.pcie_gen is None and g.ecc_uncorrected is None  # the paste ends before them: not shown
